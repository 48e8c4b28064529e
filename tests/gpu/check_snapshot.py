"""Reads a memdiag allocator snapshot the way PyTorch's own tools do, and
prints what a test needs to know about it as one JSON object.

usage: check_snapshot.py SNAPSHOT.pickle PLOT.html

pickle.load, then `python -m torch.cuda._memory_viz stats` and `trace_plot`
(the commands PyTorch documents for its snapshots); exits 0 with
{"python_unavailable": "..."} when this Python has no torch.
"""
import collections
import json
import pickle
import subprocess
import sys

path, plot = sys.argv[1], sys.argv[2]
try:
    import torch  # noqa: F401  (memory_viz needs it)
except Exception as e:  # pragma: no cover - depends on the machine
    print(json.dumps({"python_unavailable": str(e)}))
    sys.exit(0)

with open(path, "rb") as f:
    snap = pickle.load(f)

traces = [e for device in snap.get("device_traces", []) for e in device]
by_phase = collections.Counter(e.get("user_metadata", "") for e in traces if e.get("action") == "alloc")
stats = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", "stats", path], capture_output=True, text=True)
trace_plot = subprocess.run([sys.executable, "-m", "torch.cuda._memory_viz", "trace_plot", path, "-o", plot],
                            capture_output=True, text=True)
print(json.dumps({
    "keys": sorted(snap.keys()),
    "segments": len(snap.get("segments", [])),
    "trace_entries": len(traces),
    "allocs_by_phase": dict(by_phase),
    "actions": dict(collections.Counter(e.get("action", "") for e in traces)),
    "last_action": traces[-1].get("action", "") if traces else "",
    "annotations": [a.get("name", "") for a in snap.get("external_annotations", [])],
    "stats_rc": stats.returncode,
    "stats": stats.stdout[-4000:] + stats.stderr[-2000:],
    "trace_plot_rc": trace_plot.returncode,
    "trace_plot_err": trace_plot.stderr[-2000:],
}))
