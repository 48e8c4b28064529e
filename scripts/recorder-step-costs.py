#!/usr/bin/env python3
"""What each piece of the Python recorder costs a launch-bound step on CUDA,
in place: per-step host times, medians over many interleaved rounds.

    python3 scripts/recorder-step-costs.py [--case beta] [--preset small] [--rounds 40] [--steps 60]

Why per-step medians: a launch-bound loop's host time per step is its
wall time per step (the device finishes each launch before the host makes
the next), and its median over thousands of steps moves by well under 1%
where a block's total moves by several (a collection, an interrupt, the
host's other tenants land in single steps). Each variant runs one block of
--steps steps per round, the variants in turn, --rounds rounds; the first
10 steps of a block are left out (the recorder's once-a-job work: the
modules' readings, the walks of the live tensors, falls there).

Variants: the plain loop; the recorder's hooks doing nothing (what torch's
hook dispatch alone costs); the recorder's calls made explicitly at the four
phase ends (the allocator reading, the host reading at the cleanup, the
loss's copy); candidate ways of keeping the loss and of reading a phase in
one call (built here with torch.utils.cpp_extension.load_inline: they are
not the recorder's, they decide what it becomes); and the recorder itself at
its defaults, without the census, and bare.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "python", "examples"))
import memdiag  # noqa: E402
from memdiag import _native  # noqa: E402

CANDIDATES_CPP = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/core/CachingHostAllocator.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#include <unistd.h>
#include <cstdlib>

void launch_store_f32(const float* src, double* dst, cudaStream_t stream);

namespace {
constexpr std::size_t kAll = static_cast<std::size_t>(c10::CachingAllocator::StatType::AGGREGATE);

struct Candidates {
  int dev;
  std::int64_t n = 1 << 16;
  double* mapped_host = nullptr;
  double* mapped_dev = nullptr;
  at::Tensor mapped;  // the mapped page-locked slots as a CUDA tensor
  char* pinned = nullptr;
  std::int64_t used = 0;

  explicit Candidates(int d) : dev(d) {
    cudaHostAlloc(reinterpret_cast<void**>(&mapped_host), n * sizeof(double), cudaHostAllocMapped);
    void* p = nullptr;
    cudaHostGetDevicePointer(&p, mapped_host, 0);
    mapped_dev = static_cast<double*>(p);
    mapped = at::from_blob(p, {n}, at::TensorOptions().dtype(at::kDouble).device(at::kCUDA, d));
    cudaHostAlloc(reinterpret_cast<void**>(&pinned), n * sizeof(double), cudaHostAllocDefault);
  }
  std::int64_t slot() { return used++ % n; }
  // As the recorder keeps it now: a copy into page-locked memory.
  void loss_memcpy(const at::Tensor& t) {
    auto s = at::cuda::getCurrentCUDAStream(dev);
    cudaMemcpyAsync(pinned + slot() * sizeof(double), t.const_data_ptr(), t.element_size(), cudaMemcpyDeviceToHost,
                    s.stream());
  }
  // ATen's copy into a mapped slot (a conversion: a kernel, not a memcpy).
  void loss_aten(const at::Tensor& t) {
    at::NoGradGuard g;
    mapped.select(0, slot()).copy_(t);
  }
  // A kernel of one thread storing the value into a mapped slot.
  void loss_kernel(const at::Tensor& t) {
    auto s = at::cuda::getCurrentCUDAStream(dev);
    launch_store_f32(static_cast<const float*>(t.const_data_ptr()), mapped_dev + slot(), s.stream());
  }
  // Only what pybind costs: an int back.
  std::int64_t nothing() { return 0; }
  // The allocator's current allocated bytes, an int back.
  std::int64_t allocated() {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(dev)).allocated_bytes[kAll].current;
  }
  // One call a phase: the allocator's figures with the peak reset, the host
  // where asked, the loss where given (by the kernel).
  py::tuple phase(bool host, int fd, py::handle loss) {
    const auto index = static_cast<c10::DeviceIndex>(dev);
    const auto st = c10::cuda::CUDACachingAllocator::getDeviceStats(index);
    c10::cuda::CUDACachingAllocator::resetPeakStats(index);
    std::int64_t pages = -1, held = -1;
    if (host) {
      char text[128];
      const ssize_t k = ::pread(fd, text, sizeof text - 1, 0);
      if (k > 0) { text[k] = 0; char* e = nullptr; std::strtoll(text, &e, 10); pages = std::strtoll(e, nullptr, 10); }
      held = at::getHostAllocator(at::kCUDA)->get_stats().allocated_bytes.current;
    }
    if (!loss.is_none()) loss_kernel(THPVariable_Unpack(loss.ptr()));
    return py::make_tuple(st.allocated_bytes[kAll].current, st.allocated_bytes[kAll].peak, st.reserved_bytes[kAll].current,
                          st.inactive_split_bytes[kAll].current, st.num_alloc_retries, pages, held);
  }
  double value(std::int64_t i) { return mapped_host[i % n]; }
};
}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  py::class_<Candidates>(m, "Candidates")
      .def(py::init<int>())
      .def("loss_memcpy", &Candidates::loss_memcpy)
      .def("loss_aten", &Candidates::loss_aten)
      .def("loss_kernel", &Candidates::loss_kernel)
      .def("nothing", &Candidates::nothing)
      .def("allocated", &Candidates::allocated)
      .def("phase", &Candidates::phase)
      .def("value", &Candidates::value)
      .def_readonly("used", &Candidates::used);
}
"""

CANDIDATES_CU = r"""
#include <cuda_runtime.h>
__global__ void memdiag_store_f32(const float* src, double* dst) { *dst = static_cast<double>(*src); }
void launch_store_f32(const float* src, double* dst, cudaStream_t stream) {
  memdiag_store_f32<<<1, 1, 0, stream>>>(src, dst);
}
"""


def workload(case_name, preset, device):
    import mlp_job
    case = json.load(open(os.path.join(ROOT, "cases", case_name + ".json")))
    model, m = mlp_job.build(case, preset)
    model.to(device)
    opt = mlp_job.optimizer_for(case, model)
    batch = case["presets"][preset]["batch_size"]
    return model, opt, batch, m


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", default="beta")
    ap.add_argument("--preset", default="small")
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--skip", type=int, default=10, help="steps left out at a block's start")
    ap.add_argument("--only", default="", help="comma-separated variants (default: all)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("recorder-step-costs.py: CUDA only (what it measures is the CUDA path's calls)")
    dev = torch.device("cuda", 0)
    model, opt, batch, m = workload(args.case, args.preset, dev)
    native = _native.load()
    if native is None:
        sys.exit(f"recorder-step-costs.py: the native reading did not build: {_native.why()}")
    from torch.utils.cpp_extension import load_inline
    t0 = time.perf_counter()
    cand_mod = load_inline(name="memdiag_step_candidates", cpp_sources=[CANDIDATES_CPP], cuda_sources=[CANDIDATES_CU],
                           extra_cflags=["-O2"], with_cuda=True, verbose=False)
    print(f"# candidates built in {time.perf_counter() - t0:.1f} s", flush=True)
    cand = cand_mod.Candidates(0)
    losses = native.Losses()
    fd = os.open("/proc/self/statm", os.O_RDONLY)
    tmp = tempfile.mkdtemp()
    xs = [torch.randn(batch, m["input_dim"], device=dev) for _ in range(4)]
    ys = [torch.randint(0, m["output_dim"], (batch,), device=dev) for _ in range(4)]

    def plain_steps(n, at=None):
        """n steps; at: (forward, backward, step, cleanup) callables or None."""
        times = []
        f_fwd = f_bwd = f_step = f_clean = None
        if at is not None:
            f_fwd, f_bwd, f_step, f_clean = at
        for i in range(n):
            times.append(time.perf_counter_ns())
            x, y = xs[i % 4], ys[i % 4]
            loss = F.cross_entropy(model(x), y)
            if f_fwd:
                f_fwd(loss)
            loss.backward()
            if f_bwd:
                f_bwd(loss)
            opt.step()
            if f_step:
                f_step(loss)
            opt.zero_grad(set_to_none=True)
            if f_clean:
                f_clean(loss)
            del loss
        times.append(time.perf_counter_ns())
        torch.cuda.synchronize()
        return [(b - a) / 1e3 for a, b in zip(times, times[1:])]

    def read(_loss=None):
        native.read(0, True, False)

    def read_host(_loss=None):
        native.read(0, True, False)
        native.host_figures(fd, True)

    def read_bwd_memcpy(loss):
        native.read(0, True, False)
        losses.add(loss)

    def read_bwd_kernel(loss):
        native.read(0, True, False)
        cand.loss_kernel(loss)

    def phase_plain(_loss=None):
        cand.phase(False, fd, None)

    def phase_host(_loss=None):
        cand.phase(True, fd, None)

    def phase_loss(loss):
        cand.phase(False, fd, loss)

    def noop(_loss=None):
        pass

    def with_hooks(n):
        handles = [model.register_forward_pre_hook(lambda mod, a, k: None, with_kwargs=True),
                   model.register_forward_hook(lambda mod, a, o: None, always_call=True),
                   opt.register_step_pre_hook(lambda o, a, k: None),
                   opt.register_step_post_hook(lambda o, a, k: None)]
        original = torch.autograd.backward

        def backward(tensors, *a, **k):
            return original(tensors, *a, **k)
        torch.autograd.backward = backward
        zg = opt.zero_grad

        def zero_grad(*a, **k):
            return zg(*a, **k)
        opt.zero_grad = zero_grad
        try:
            return plain_steps(n)
        finally:
            for h in handles:
                h.remove()
            torch.autograd.backward = original
            del opt.zero_grad

    def recorded(**kw):
        def run(n):
            with memdiag.record(model, opt, output=os.path.join(tmp, "r.json"), **kw):
                return plain_steps(n)
        return run

    variants = {
        "plain": lambda n: plain_steps(n),
        "4 no-op calls": lambda n: plain_steps(n, (noop, noop, noop, noop)),
        "no-op hooks": with_hooks,
        "pybind nothing x4": lambda n: plain_steps(n, (lambda _l: cand.nothing(),) * 4),
        "allocated x4": lambda n: plain_steps(n, (lambda _l: cand.allocated(),) * 4),
        "read x4": lambda n: plain_steps(n, (read, read, read, read)),
        "read x4 + host": lambda n: plain_steps(n, (read, read, read, read_host)),
        "loss memcpy": lambda n: plain_steps(n, (None, losses.add, None, None)),
        "loss aten": lambda n: plain_steps(n, (None, cand.loss_aten, None, None)),
        "loss kernel": lambda n: plain_steps(n, (None, cand.loss_kernel, None, None)),
        "read x4 + host + loss memcpy": lambda n: plain_steps(n, (read, read_bwd_memcpy, read, read_host)),
        "read x4 + host + loss kernel": lambda n: plain_steps(n, (read, read_bwd_kernel, read, read_host)),
        "phase x4 + host + loss kernel": lambda n: plain_steps(n, (phase_plain, phase_loss, phase_plain, phase_host)),
        "recorder defaults": recorded(),
        "recorder census=False": recorded(census=False),
        "recorder bare": recorded(census=False, kept=False, modules=False, process_memory=False),
    }
    if args.only:
        keep = set(args.only.split(","))
        variants = {k: v for k, v in variants.items() if k in keep or k == "plain"}
    # a warm-up of each
    for fn in variants.values():
        fn(12)
    per = {k: [] for k in variants}
    per_round = {k: [] for k in variants}
    t0 = time.perf_counter()
    for r in range(args.rounds):
        for k, fn in variants.items():
            ts = fn(args.steps)[args.skip:]
            per[k].extend(ts)
            per_round[k].append(statistics.median(ts))
    print(f"# torch {torch.__version__} on {torch.cuda.get_device_name(0)}; {args.case} {args.preset} batch {batch}; "
          f"{args.rounds} rounds x {args.steps} steps (first {args.skip} of each left out); {time.perf_counter() - t0:.0f} s")
    base = statistics.median(per["plain"])
    print(f"{'variant':34s} {'median us':>10s} {'+us':>8s} {'+%':>7s}   {'rounds: +us p25..p75':>22s}")
    for k in variants:
        med = statistics.median(per[k])
        diffs = sorted(a - b for a, b in zip(per_round[k], per_round["plain"]))
        q = statistics.quantiles(diffs, n=4) if len(diffs) >= 4 else [diffs[0], 0, diffs[-1]]
        print(f"{k:34s} {med:10.1f} {med - base:8.1f} {100 * (med - base) / base:6.2f}%   {q[0]:9.1f} .. {q[2]:9.1f}")
    # the candidates keep the right values
    torch.cuda.synchronize()
    loss = torch.tensor(2.5, device=dev)
    before = cand.used
    cand.loss_kernel(loss)
    cand.loss_aten(loss * 2)
    torch.cuda.synchronize()
    print(f"# candidate values: kernel {cand.value(before)} (2.5), aten {cand.value(before + 1)} (5.0)")


if __name__ == "__main__":
    main()
