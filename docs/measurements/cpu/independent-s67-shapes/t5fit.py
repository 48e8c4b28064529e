"""Fit each step's peak of r/t5_seq2seq.json (steps 1-9) on source and target tokens (schedule from logs/t5_seq2seq.record.log)."""
import json, re, numpy as np
r = json.load(open("r/t5_seq2seq.json"))
sched = [tuple(map(int, re.search(r"'l': (\d+), 'lt': (\d+)", l).groups()))
         for l in open("logs/t5_seq2seq.record.log") if l.startswith("step")]
pk = {}
for s in r["samples"]:
    if s["step"] is not None:
        pk[s["step"]] = max(pk.get(s["step"], 0), s["peak_allocated_mib"])
X = np.array([[1, 8 * sched[i][0], 8 * sched[i][1]] for i in range(1, 10)], float)
y = np.array([pk[i] for i in range(1, 10)])
for cols, name in [([0, 1], "source tokens only"), ([0, 1, 2], "source + target tokens")]:
    c, *_ = np.linalg.lstsq(X[:, cols], y, rcond=None)
    print(f"{name}: coefficients {np.round(c, 4)}  max |error| {np.max(abs(X[:, cols] @ c - y)):.1f} MiB")
print("per-step peaks:", {i: round(pk[i], 1) for i in range(10)}, "schedule (src, tgt):", sched)
