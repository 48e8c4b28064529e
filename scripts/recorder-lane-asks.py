#!/usr/bin/env python3
"""How often the recorder's steady lane asks NVML for the process's device
memory and reads the host's, over 400 recorded steady steps of beta small
(scripts/recorder-overhead.py's workload) on CUDA: the lane's Python helpers
(memdiag/_lane.py's Helpers.process_mib and .host) counted and NVML's calls
timed. A check of where a steady step's cost could hide outside the
recorder's own clock.

    python3 scripts/recorder-lane-asks.py
"""
import os
import sys
import time
import importlib.util

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "python"))
import torch, memdiag
from memdiag import _lane, _probe
spec = importlib.util.spec_from_file_location("ro", os.path.join(ROOT, "scripts", "recorder-overhead.py"))
ro = importlib.util.module_from_spec(spec); spec.loader.exec_module(ro)
try:
    import pynvml; print("pynvml", pynvml.__file__)
except Exception as e:
    print("no pynvml:", e)
calls = {"process_mib": 0, "host": 0, "nvml_s": 0.0}
pm, host = _lane.Helpers.process_mib, _lane.Helpers.host
def cpm(self):
    t = time.perf_counter(); r = pm(self); calls["nvml_s"] += time.perf_counter() - t; calls["process_mib"] += 1; return r
def ch(self):
    calls["host"] += 1; return host(self)
_lane.Helpers.process_mib, _lane.Helpers.host = cpm, ch
if not torch.cuda.is_available():
    sys.exit("memdiag: scripts/recorder-lane-asks.py needs CUDA (the steady lane reads the device)")
dev = torch.device("cuda")
model, opt, loop, label = ro.mlp_workload("beta", dev, "small")
loop(20)
with memdiag.record(model, opt, output=os.path.join(__import__("tempfile").mkdtemp(), "r.json"), every=1) as rec:
    loop(20); torch.cuda.synchronize()
    c0 = dict(calls)
    t = time.perf_counter(); loop(400); torch.cuda.synchronize(); dt = time.perf_counter() - t
    print("lane on:", rec._lane_on, f"{dt / 400 * 1e3:.3f} ms/step over 400 steady steps")
    print("NVML asked", calls["process_mib"] - c0["process_mib"], "times,", f"{(calls['nvml_s'] - c0['nvml_s']) / max(1, calls['process_mib'] - c0['process_mib']) * 1e6:.0f} us each;",
          "host read", calls["host"] - c0["host"], "times")
