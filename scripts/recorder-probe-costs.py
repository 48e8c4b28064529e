#!/usr/bin/env python3
"""What each of the Python recorder's calls costs on CUDA: idle (2000 calls), and
behind a 187 ms kernel (a call that returns in microseconds does not wait for
the device; .item() does); then the census's cost per role on the MLP cases;
then each of the probe's calls timed in place, in a recorded loop.

    python3 scripts/recorder-probe-costs.py
"""
import os, sys, time, torch
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from memdiag import _probe, _losses
d = torch.device("cuda", 0)
torch.ones(1, device=d)
p = _probe.CudaProbe(d)
buf = _losses.LossBuffer(d)
loss = torch.ones((), device=d) * 2.5
calls = {
    "_cuda_memoryStats": lambda: torch._C._cuda_memoryStats(0),
    "mem_get_info": lambda: torch.cuda.mem_get_info(d),
    "resetPeak": lambda: torch._C._cuda_resetPeakMemoryStats(0),
    "nvml processes": lambda: p._process_mib(),
    "probe.read(no sync, no process)": lambda: p.read(sync=False, process=False),
    "probe.read(no sync, process)": lambda: p.read(sync=False, process=True),
    "loss buffer add": lambda: buf.add(loss),
    "loss.item()": lambda: loss.item(),
}
print(f"{'call':36s} {'idle us':>9s} {'busy: returned after ms':>24s} (a 200 ms kernel queued first)")
for name, fn in calls.items():
    fn(); torch.cuda.synchronize()
    n = 2000 if name != "loss buffer add" else 1000
    t = time.perf_counter()
    for _ in range(n):
        fn()
    idle = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    torch.cuda._sleep(int(3.7e8))  # ~200 ms at the H200's clock
    t = time.perf_counter()
    fn()
    busy = (time.perf_counter() - t) * 1e3
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    torch.cuda._sleep(int(3.7e8)); torch.cuda.synchronize()
    sleep_ms = (time.perf_counter() - t2) * 1e3
    print(f"{name:36s} {idle:9.1f} {busy:24.2f} (the kernel alone: {sleep_ms:.0f} ms)")
torch.cuda.synchronize()
print("loss buffer values ok:", all(v == 2.5 for v in buf.values()))
# The census's cost on the reference models and ResNet-50 (one role, one count)
import json
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "examples"))
from memdiag import _census
import mlp_job
for name in ("alpha", "beta", "gamma"):
    case = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cases", name + ".json")))
    model, m = mlp_job.build(case, case["default_preset"]); model.cuda()
    opt = mlp_job.optimizer_for(case, model)
    x = torch.randn(8, m["input_dim"], device=d)
    model(x).sum().backward(); opt.step()
    ps = list(model.parameters())
    for role, fn in (("gradients", lambda: _census.gradients_mib(ps, "cuda")),
                     ("optimizer state", lambda: _census.optimizer_state_mib([opt], "cuda"))):
        t = time.perf_counter()
        for _ in range(500):
            fn()
        print(f"census {name} {role} ({len(ps)} tensors): {(time.perf_counter() - t) / 500 * 1e6:.1f} us")

# The same calls in a recorded loop (beta small, no census, 100 steps): each
# of the probe's calls timed where the recorder makes it, against the idle
# figures above (a reading costs about 3x its idle time in the loop: which
# call, is what this answers).
import importlib.util
import tempfile
import memdiag
from memdiag import _recorder
_recorder._TIMED_EVERY = 1  # its clock read at every step, as this script reads it
spec = importlib.util.spec_from_file_location(
    "overhead", os.path.join(os.path.dirname(os.path.abspath(__file__)), "recorder-overhead.py"))
overhead = importlib.util.module_from_spec(spec)
spec.loader.exec_module(overhead)
spent = {"_cuda_memoryStats": [0, 0], "cudaMemGetInfo": [0, 0], "resetPeak": [0, 0]}


def timed(name, fn):
    def call(*a):
        t = time.perf_counter_ns()
        try:
            return fn(*a)
        finally:
            spent[name][0] += time.perf_counter_ns() - t
            spent[name][1] += 1
    return call


model, opt, loop, label = overhead.mlp_workload("beta", d, None)
loop(3)
stats, reset = torch._C._cuda_memoryStats, torch._C._cuda_resetPeakMemoryStats
torch._C._cuda_memoryStats = timed("_cuda_memoryStats", stats)
torch._C._cuda_resetPeakMemoryStats = timed("resetPeak", reset)
rec = memdiag.record(model, opt, output=os.path.join(tempfile.mkdtemp(), "r.json"), census=False)
with rec:
    rec._probe._mem_get_info = timed("cudaMemGetInfo", rec._probe._mem_get_info)
    t = time.perf_counter_ns()
    loop(100)
    torch.cuda.synchronize()
    wall = time.perf_counter_ns() - t
torch._C._cuda_memoryStats, torch._C._cuda_resetPeakMemoryStats = stats, reset
print(f"in the loop ({label}, no census, 100 steps, {wall / 1e6 / 100:.3f} ms a step; recorder host time "
      f"{rec._host_ns / 1e3 / 100:.0f} us a step):")
for name, (ns, n) in spent.items():
    print(f"  {name:20s} {ns / 1e3 / max(n, 1):8.1f} us a call, {n} calls")
