"""Table of predictions against the counted truth: logs/capacity.json + logs/count.jsonl (+ own_mlp from memory_diagnostics)."""
import json
cap = json.load(open("logs/capacity.json"))
counts = {}
for l in open("logs/count.jsonl"):
    d = json.loads(l)
    key = (d["job"], d["batch"], d["seq"])
    counts[key] = d["peak_mib"]


def truth(points, budget):
    """points: [(x, peak)] sorted; x where the peak reaches the budget, linear between the bracketing points."""
    pts = sorted(points)
    below = [p for p in pts if p[1] <= budget]
    above = [p for p in pts if p[1] > budget]
    if not below or not above:
        return None, None
    (x0, y0), (x1, y1) = below[-1], above[0]
    return x0 + (budget - y0) * (x1 - x0) / (y1 - y0), (x0, x1)


rows = []
for job, c in cap.items():
    budget = c["budget"]
    ans = c["answers"]
    single = [a["max_batch"] for a in ans[:-1]]
    multi = ans[-1]["max_batch"]
    if job == "gpt2var":
        pts = [(16 * s, v) for (j, b, s), v in counts.items() if j == job and b == 16 and s]
        single = [7062, 7062, 7062]; multi = 7062  # step_capacity, tokens (the same from every report and the set)
        unit = "tokens (batch 16)"
        pk = counts.get(("gpt2var", 16, 441))
    else:
        pts = [(b, v) for (j, b, s), v in counts.items() if j == job and not s]
        unit = "global batch" if job == "accum" else "batch"
        pk = counts.get((job, multi, 0))
    t, br = truth(pts, budget)
    err = (multi - t) / t * 100 if t else None
    errs = [round((s - t) / t * 100, 1) for s in single] if t else None
    rows.append((job, unit, budget, single, multi, t, br, err, errs, pk))
    print(f"{job:10s} {unit:18s} budget {budget:5d}  single {single}  set {multi}  truth {t and round(t,2)} (between {br})  "
          f"err set {err and round(err,1)}%  err singles {errs}  peak@P {pk and round(pk,1)} ({pk and round(pk-budget,1):+} MiB)")
json.dump(rows, open("logs/table.json", "w"), indent=1)
