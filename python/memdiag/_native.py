"""The native allocator reading (native/allocator_reading.cpp), built on first
use with torch.utils.cpp_extension against the torch the job runs on, and
cached by it (~/.cache/torch_extensions, or TORCH_EXTENSIONS_DIR).

Why: one reading through torch's Python API (torch._C._cuda_memoryStats)
builds a nested dict of every statistic for the four the recorder needs,
and costs a launch-bound loop tens of microseconds a phase; the native one
returns them as a tuple, and resets the peak in the same call. It also
counts the census's gradients (gradient_bytes): from Python each gradient
set_to_none made anew costs a tensor and a storage object, at every
backward. The build needs a C++ compiler and the CUDA
toolkit's headers (nvcc's CUDA_HOME), and takes tens of seconds once per
machine and torch version; where it cannot be built the recorder reads
through the Python API, as before, and the report says why.

It also holds the recorder's steady lane (native/steady_lane.cpp,
memdiag/_lane.py): the hooks of a steady step without the recorder's Python.

MEMDIAG_NATIVE=0 never builds or loads it; MEMDIAG_NATIVE_LANE=0 loads it
without the steady lane (the recorder's Python at every hook, as before).
MEMDIAG_NATIVE_TEST=1 (the tests of a machine without a device) builds and
loads it without CUDA, its readings made up by a counter: the lane's
tests compare it with the recorder's Python reading the same numbers.
"""
import hashlib
import os
import sys
import time

_state = {"module": None, "why": None, "tried": False}


def load():
    """The module, or None (why() says why)."""
    if _state["tried"]:
        return _state["module"]
    _state["tried"] = True
    if os.environ.get("MEMDIAG_NATIVE", "1") == "0":
        _state["why"] = "MEMDIAG_NATIVE=0"
        return None
    try:
        import torch
        from torch.utils import cpp_extension
        test = os.environ.get("MEMDIAG_NATIVE_TEST") == "1"
        if not torch.cuda.is_available() and not test:
            _state["why"] = "no CUDA"
            return None
        if "TORCH_CUDA_ARCH_LIST" not in os.environ and test and not torch.cuda.is_available():
            os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0"
            set_arch = True
        elif "TORCH_CUDA_ARCH_LIST" not in os.environ:
            # No CUDA kernels are compiled, but cpp_extension asks for an
            # architecture list all the same: the device's own.
            major, minor = torch.cuda.get_device_capability()
            os.environ["TORCH_CUDA_ARCH_LIST"] = f"{major}.{minor}"
            set_arch = True
        else:
            set_arch = False
        here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "native")
        sources = [os.path.join(here, f) for f in ("allocator_reading.cpp", "steady_lane.cpp")]
        # Named by what it is built from, its header too (cpp_extension
        # rebuilds when a source changes, not when a header does).
        digest = hashlib.sha256()
        for f in sources + [os.path.join(here, "readings.hpp")]:
            with open(f, "rb") as fh:
                digest.update(fh.read())
        name = "memdiag_native_" + digest.hexdigest()[:12]
        build_dir = cpp_extension._get_build_directory(name, verbose=False)
        built = any(f.endswith(".so") for f in os.listdir(build_dir)) if os.path.isdir(build_dir) else False
        t0 = time.perf_counter()
        if not built:
            print("memdiag: building the native allocator reading once (torch.utils.cpp_extension; "
                  "MEMDIAG_NATIVE=0 skips it)", file=sys.stderr, flush=True)
        try:
            module = cpp_extension.load(name=name, sources=sources, extra_cflags=["-O2"], with_cuda=True,
                                        verbose=False)
        finally:
            if set_arch:
                os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
        if not built:
            print(f"memdiag: built in {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
        if test and not torch.cuda.is_available():
            module._test_fake_readings(True)
        _state["module"] = module
    except Exception as e:  # no compiler, no CUDA headers: the Python API reads the same figures
        _state["why"] = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"[:300]
    return _state["module"]


def why():
    return _state["why"]
