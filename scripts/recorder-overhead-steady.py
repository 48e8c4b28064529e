#!/usr/bin/env python3
"""What recording every step costs a launch-bound loop once it is running:
paired blocks of steady steps, recorded and plain, interleaved.

    python3 scripts/recorder-overhead-steady.py [--device cuda] [--cases beta,gamma]
                                                [--block 200] [--pairs 15] [--skip 10] [--shuffle SEED]

scripts/recorder-overhead.py times many configurations in short loops (50
steps, 5 rounds) and its overhead columns moved by several percent between
rounds on the H200's host, more than the figure it is after. This one asks
one question, issue 36.6's (every step recorded, at the defaults and without
the tensor census, on a step of about 3 ms), and asks it so that the host's
drift cancels: blocks of --block steps, in the order plain, recorded,
plain, no census, plain, recorded, ..., --pairs of each recorded mode, and
each recorded block against the mean of the two plain blocks beside it.
--shuffle SEED draws each round's order of the recorded modes at random
(plain blocks still between them), so that a mode's figure does not carry
what its fixed neighbour leaves behind.

A block starts a recording (every=1), runs --skip steps (the recorder's
once-a-job work: the modules' readings at steps 0 and 1, the kept walks at
the cleanups of steps 0 to 6, every hook timed below step 10), waits for the
device, then times --block steps to a wait for the device at their end, and
ends the recording outside the timed span (starting and ending a recording,
the report's writing, is paid once a job; printed apart, with the first
steps' cost). Plain blocks run the same --skip steps untimed. Printed, per
workload: the plain loop's ms a step, each mode's overhead (median of the
paired ratios, and their 25th and 75th percentiles), and the recorder's own
clock over the steady steps it timed (us a step).

--modes adds two blocks that are not the recorder, to find the floor a
design of its hooks can reach on this host: "no-op hooks" installs the
hooks the recorder installs (the model's forward pre-hook with keywords and
its forward hook, the optimizer's step hooks, zero_grad() wrapped on the
model and the optimizer, torch.autograd.backward patched) doing nothing,
and "bare readings" the same hooks doing only what a recorded step cannot
do without: the four phase readings (the native call that reads the
allocator and resets its peak) and the loss's copy to the host;
"readings no copy" and "loss copy only" are its two parts alone.
"""
import argparse
import random
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
import memdiag  # noqa: E402
from memdiag import _lane, _recorder  # noqa: E402

# The workloads are recorder-overhead.py's (memdiag's MLP cases written in
# PyTorch, torchvision's ResNet-50), loaded from its file.
_spec = importlib.util.spec_from_file_location("recorder_overhead", os.path.join(ROOT, "scripts", "recorder-overhead.py"))
_overhead = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_overhead)

MODES = {"recorded": {"census": True}, "no census": {"census": False},
         # The device's process memory through NVML (process_memory=False
         # leaves it out): what asking it costs where the device's use moves.
         "no census no nvml": {"census": False, "process_memory": False}}
# The recorder without its steady lane (MEMDIAG_NATIVE_LANE=0: its Python at
# every hook), to set before and after side by side in one run.
PYTHON = {"python recorded": {"census": True}, "python no census": {"census": False}}
# "bare readings" split in two, to tell which of its parts a figure is:
# the four readings without the loss's copy, and the copy alone.
FLOOR = ("no-op hooks", "bare readings", "readings no copy", "loss copy only")


class BareHooks:
    """The recorder's hooks, each doing nothing (work=False) or only the
    irreducible work of a recorded step (work=True): one native reading at
    each of the four phase ends, and the loss's copy at backward's end."""

    def __init__(self, model, opt, device, work, reads=True, copies=True):
        from memdiag import _native
        native = _native.load() if work else None
        if work and native is None:
            raise SystemExit(f"bare readings need the native reading: {_native.why()}")
        index = (device.index if device.index is not None else torch.cuda.current_device()) if work else None
        losses = native.Losses() if work else None
        read = native.read if work and reads else (lambda *a: None)
        self.kept = 0

        def noop(*args):
            return None

        def close(*args):
            read(index, True, False)

        self.handles = [model.register_forward_pre_hook(noop, with_kwargs=True),
                        model.register_forward_hook(noop, always_call=True),
                        opt.register_step_pre_hook(noop),
                        opt.register_step_post_hook(close if work else noop)]
        self.patched = []
        for obj in (model, opt):
            original = obj.zero_grad

            def wrapped(*a, _original=original, **k):
                r = _original(*a, **k)
                if work:
                    read(index, True, False)
                return r
            obj.zero_grad = wrapped
            self.patched.append(obj)
        self.backward = torch.autograd.backward
        original_backward = self.backward

        def backward(tensors, *a, **k):
            if work:
                read(index, True, False)
            r = original_backward(tensors, *a, **k)
            if work:
                read(index, True, False)
                if copies:
                    losses.add(tensors)
            return r
        torch.autograd.backward = backward

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for h in self.handles:
            h.remove()
        for obj in self.patched:
            del obj.zero_grad
        torch.autograd.backward = self.backward
        return False


def quantile(values, q):
    s = sorted(values)
    i = q * (len(s) - 1)
    lo = int(i)
    return s[lo] + (s[min(lo + 1, len(s) - 1)] - s[lo]) * (i - lo)


def block(device, loop, args, mode, path):
    """(ms a step of the timed steps, recorder's us a timed steady step or
    None, ms outside the timed steps)."""
    sync = _overhead.sync
    t0 = time.perf_counter()
    if mode is None:
        loop(args.skip)
        sync(device)
        t1 = time.perf_counter()
        loop(args.block)
        sync(device)
        return (time.perf_counter() - t1) * 1000.0 / args.block, None, None
    if mode in FLOOR:
        with BareHooks(model_of[0], opt_of[0], device, mode != "no-op hooks",
                       reads=mode != "loss copy only", copies=mode != "readings no copy"):
            loop(args.skip)
            sync(device)
            t1 = time.perf_counter()
            loop(args.block)
            sync(device)
            t2 = time.perf_counter()
        return (t2 - t1) * 1000.0 / args.block, None, (time.perf_counter() - t0 - (t2 - t1)) * 1000.0
    os.environ["MEMDIAG_NATIVE_LANE"] = "0" if mode in PYTHON else "1"
    with memdiag.record(model_of[0], opt_of[0], output=path, every=1, **{**MODES, **PYTHON}[mode],
                        **MADE_UP[0]) as rec:
        loop(args.skip)
        sync(device)
        _lane.spill(rec)  # the steady lane's counts, back in the recorder (it takes them again a step later)
        host0, timed0 = rec._host_ns, rec._timed_later
        t1 = time.perf_counter()
        loop(args.block)
        sync(device)
        t2 = time.perf_counter()
        _lane.spill(rec)
        timed = rec._timed_later - timed0
        host_us = (rec._host_ns - host0) / 1e3 / timed if timed else None
    outside = (time.perf_counter() - t0 - (t2 - t1)) * 1000.0
    return (t2 - t1) * 1000.0 / args.block, host_us, outside


model_of, opt_of = [None], [None]
MADE_UP = [{}]  # the recorder's options with --made-up-readings


def made_up_readings():
    """The recorder's CUDA path on this machine's CPU, its readings made up
    (python/tests/made_up_cuda.py): what the recorder's host side costs,
    the lane's and its Python's, where no device is at hand. The device's
    own calls cost nothing here, so this measures the recorder's code and
    torch's calling of its hooks, not a step on a GPU."""
    sys.path.insert(0, os.path.join(ROOT, "python", "tests"))
    import made_up_cuda
    from memdiag import _census, _probe
    if made_up_cuda.NATIVE is None:
        raise SystemExit(f"--made-up-readings: the native module could not be built here: {_native_why()}")
    _probe.CudaProbe = made_up_cuda.FakeCudaProbe
    _recorder._oom_observer_attached.add(0)
    _census._cuda_flag = lambda device_type: None  # the CPU's tensors counted as the device's: the same work
    MADE_UP[0] = {"device": "cuda", "warmup": False}


def _native_why():
    from memdiag import _native
    return _native.why()


def one(name, args):
    if args.made_up_readings:
        made_up_readings()
    device = torch.device(args.device)
    torch.manual_seed(0)
    model, opt, loop, label = _overhead.resnet_workload(device) if name == "resnet50" else \
        _overhead.mlp_workload(name, device, args.preset)
    model_of[0], opt_of[0] = model, opt
    loop(20)  # kernels, workspaces, the optimizer's state
    path = os.path.join(tempfile.mkdtemp(), "r.json")
    # plain, recorded, plain, no census, plain, ...: every recorded block
    # has a plain block on each side.
    modes = args.modes.split(",")
    order = [None]
    # --shuffle SEED: each round's modes in a random order, so that no mode
    # always follows the same one (a position effect, such as the collector
    # after the previous recording, then reads as noise, not as a cost).
    rng = random.Random(args.shuffle) if args.shuffle is not None else None
    for _ in range(args.pairs):
        round_modes = list(modes)
        if rng is not None:
            rng.shuffle(round_modes)
        for mode in round_modes:
            order += [mode, None]
    # One of each first, untimed: the recorder's own first use (its native
    # reading's load, the modules' first walk) is no block's.
    for mode in modes:
        block(device, loop, args, mode, path)
    results = [block(device, loop, args, mode, path) for mode in order]
    out = {"workload": label, "plain_ms": statistics.median(r[0] for m, r in zip(order, results) if m is None)}
    for mode in modes:
        ratios, host, outside = [], [], []
        for i, m in enumerate(order):
            if m != mode:
                continue
            ratios.append(results[i][0] / ((results[i - 1][0] + results[i + 1][0]) / 2))
            if results[i][1] is not None:
                host.append(results[i][1])
            outside.append(results[i][2] - (results[i - 1][0] + results[i + 1][0]) / 2 * args.skip)
        out[mode] = {"overhead_pct": (statistics.median(ratios) - 1) * 100,
                     "q25_pct": (quantile(ratios, 0.25) - 1) * 100, "q75_pct": (quantile(ratios, 0.75) - 1) * 100,
                     "host_us": statistics.median(host) if host else float("nan"),
                     "once_ms": statistics.median(outside)}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--cases", default="beta,gamma")
    ap.add_argument("--preset", default="small", help="the MLP cases' preset (default small: a 2-3 ms step on the H200)")
    ap.add_argument("--block", type=int, default=200, help="timed steps a block")
    ap.add_argument("--pairs", type=int, default=15, help="blocks of each recorded mode")
    ap.add_argument("--skip", type=int, default=10, help="steps a block runs before its timed ones")
    ap.add_argument("--modes", default=",".join(MODES),
                    help="blocks beside the plain ones, in order (default 'recorded,no census'); "
                         "also 'python recorded' and 'python no census' (the recorder without its steady "
                         "lane: MEMDIAG_NATIVE_LANE=0), 'no-op hooks' and 'bare readings' (see above)")
    ap.add_argument("--made-up-readings", action="store_true",
                    help="on the CPU: the recorder's CUDA path with made-up readings (its host side alone)")
    ap.add_argument("--shuffle", type=int, metavar="SEED",
                    help="each round's recorded modes in a random order drawn from SEED (default: the order of --modes)")
    ap.add_argument("--single", help=argparse.SUPPRESS)
    args = ap.parse_args()
    for mode in args.modes.split(","):
        if mode not in MODES and mode not in PYTHON and mode not in FLOOR:
            ap.error(f"--modes: unknown mode '{mode}' (allowed: {', '.join(list(MODES) + list(PYTHON) + list(FLOOR))})")
    if args.skip < _recorder._TIMED_ALL_BELOW:
        ap.error(f"--skip must be at least {_recorder._TIMED_ALL_BELOW} (the recorder times every step below it)")
    if args.single:
        print(json.dumps(one(args.single, args)))
        return 0
    name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"
    print(f"torch {torch.__version__} on {name}; blocks of {args.block} steps after {args.skip}, "
          f"{args.pairs} of each recorded mode between plain ones"
          f"{'' if args.shuffle is None else f', each round in a random order (seed {args.shuffle})'}; "
          f"medians of the paired ratios [25th, 75th percentile]")
    if args.device.startswith("cuda"):
        from memdiag import _native
        print("allocator readings: " + ("native (memdiag/native/allocator_reading.cpp)" if _native.load() is not None
                                        else f"torch's Python API ({_native.why()})"))
    modes = args.modes.split(",")
    print(f"{'workload':26s} {'plain ms/step':>13s} " +
          " ".join(f"{m:>22s} {'host us':>8s}" for m in modes) + f" {'once ms':>12s} (each mode)")
    failed = 0
    for case in args.cases.split(","):
        cmd = [sys.executable, os.path.abspath(__file__), "--single", case, "--device", args.device, "--preset",
               args.preset, "--block", str(args.block), "--pairs", str(args.pairs), "--skip", str(args.skip),
               "--modes", args.modes] + (["--made-up-readings"] if args.made_up_readings else []) + \
              (["--shuffle", str(args.shuffle)] if args.shuffle is not None else [])
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            print(f"{case:26s} failed: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}")
            failed += 1
            continue
        r = json.loads(p.stdout.strip().splitlines()[-1])

        def cell(m):
            return f"{r[m]['overhead_pct']:6.1f}% [{r[m]['q25_pct']:5.1f}, {r[m]['q75_pct']:5.1f}]"
        print(f"{r['workload']:26s} {r['plain_ms']:13.3f} " +
              " ".join(f"{cell(m):>22s} {r[m]['host_us']:8.0f}" for m in modes) + " " +
              " ".join(f"{r[m]['once_ms']:12.1f}" for m in modes))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
