#!/usr/bin/env python3
"""What each of the Python recorder's calls costs on CUDA: idle (2000 calls), and
behind a 187 ms kernel (a call that returns in microseconds does not wait for
the device; .item() does); then the census's cost per role on the MLP cases.

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
