"""Ask compare_memory_reports for each job's capacity (each run alone, and the pair) -> logs/capacity-JOB.txt, logs/capacity.json"""
import json, subprocess, sys
C = "/work/main/build/bin/compare_memory_reports"
JOBS = {"effnet": ([4, 16], 512), "vitfrozen": ([8], 256), "t5": ([2, 8], 1024),
        "neoxaccum": ([4], 512), "mlpsgdm": ([256], 256), "optvar": ([4], 768)}
out = {}
for job, (bs, budget) in JOBS.items():
    sets = [[b] for b in bs] + ([bs] if len(bs) > 1 else [])
    res, txt = [], []
    for s in sets:
        files = [f"r/{job}-b{b}.json" for b in s]
        j = json.loads(subprocess.run([C, *files, "--budget-mib", str(budget), "--format", "json"], capture_output=True, text=True).stdout)
        t = subprocess.run([C, *files, "--budget-mib", str(budget)], capture_output=True, text=True).stdout
        txt.append("$ compare_memory_reports " + " ".join(files) + f" --budget-mib {budget}\n" + t)
        g = j["groups"][0]
        c = (g.get("capacity") or [{}])[0]
        sc = (g.get("step_capacity") or [{}])
        sc = sc[0] if sc else {}
        res.append({"runs": s, "max_batch": c.get("max_batch"), "binding": c.get("binding"), "text": c.get("text"),
                    "caveats": c.get("caveats"), "cause": g["dominant_cause"],
                    "step_capacity": sc})
        print(job, s, budget, "max_batch", c.get("max_batch"), "steepest", sc.get("max_size_at_steepest"), sc.get("unit"))
    out[job] = {"budget": budget, "answers": res}
    open(f"logs/capacity-{job}.txt", "w").write("\n\n".join(txt))
json.dump(out, open("logs/capacity.json", "w"), indent=1)
