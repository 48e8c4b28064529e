#!/usr/bin/env python3
"""What single calls cost on this host, each timed alone in a loop after a
first backward: the clock, the native readings the recorder and its steady
lane make (memdiag/native/readings.hpp), the loss's copy, torch's Python
reading of allocated, and a module's call with and without two no-op
hooks. Run from the repository's root on a CUDA machine:

    python3 scripts/recorder-call-costs.py
"""
import time, torch, sys, os
sys.path.insert(0, "python")
from memdiag import _native
n = _native.load()
dev = torch.device("cuda")
m = torch.nn.Linear(256, 256).to(dev)
loss = m(torch.randn(8, 256, device=dev)).sum()
loss.backward()
torch.cuda.synchronize()
L = n.Losses()
def t(label, f, k=20000):
    for _ in range(200): f()
    t0 = time.perf_counter_ns()
    for _ in range(k): f()
    print(f"{label:40s} {(time.perf_counter_ns()-t0)/k/1000:7.2f} us")
t("perf_counter_ns", time.perf_counter_ns)
t("native.read(reset, no device)", lambda: n.read(0, True, False))
t("native.read(no reset)", lambda: n.read(0, False, False))
t("native.allocated", lambda: n.allocated(0))
t("native.read(device used)", lambda: n.read(0, True, True), 5000)
t("Losses.add", lambda: L.add(loss), 5000)
t("torch.is_grad_enabled", torch.is_grad_enabled)
t("python noop", lambda: None)
import threading
t("threading.current_thread", threading.current_thread)
t("torch.cuda.memory_allocated", lambda: torch.cuda.memory_allocated(0), 5000)
x = torch.randn(8, 256, device=dev)
t("hooks none: m(x)", lambda: m(x), 5000)
h1 = m.register_forward_pre_hook(lambda *a: None, with_kwargs=True)
h2 = m.register_forward_hook(lambda *a: None, always_call=True)
t("hooks 2 python no-op: m(x)", lambda: m(x), 5000)
h1.remove(); h2.remove()
