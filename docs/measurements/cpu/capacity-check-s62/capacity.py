"""Ask compare_memory_reports for the capacity of each job at its budget: from each single run and from the set.
Writes logs/capacity-<job>.txt (text output) and logs/capacity.json (the figures)."""
import json, subprocess, sys
C = "/work/main/build/bin/compare_memory_reports"
JOBS = {  # job: (recorded batches, budget MiB)
    "resnet50": ([4, 8, 16], 1024), "vit": ([2, 4, 8], 1024), "mobilenet": ([8, 16, 32], 512),
    "bert": ([2, 4, 8], 2048), "llama": ([2, 4, 8], 1024), "gpt2var": ([4, 8, 16], 2048),
    "adamw_mlp": ([64, 128, 256], 320), "frozen": ([8, 16, 32], 256), "accum": ([4, 8, 16], 512),
}
only = sys.argv[1:]
out = {}
try:
    out = json.load(open("logs/capacity.json"))
except Exception:
    pass
for job, (bs, budget) in JOBS.items():
    if only and job not in only: continue
    sets = [[b] for b in bs] + [bs]
    res = []
    txt = []
    for s in sets:
        files = [f"r/{job}-b{b}.json" for b in s]
        j = json.loads(subprocess.run([C, *files, "--budget-mib", str(budget), "--format", "json"], capture_output=True, text=True).stdout)
        t = subprocess.run([C, *files, "--budget-mib", str(budget)], capture_output=True, text=True).stdout
        txt.append("$ compare_memory_reports " + " ".join(files) + f" --budget-mib {budget}\n" + t)
        g = j["groups"][0]
        caps = g.get("capacity") or []
        c = caps[0] if caps else {}
        ev = [e for e in g.get("evidence_data", []) if e.get("code") == "forward_increment"]
        res.append({"runs": s, "max_batch": c.get("max_batch"), "binding": c.get("binding"), "text": c.get("text"),
                    "cause": g["dominant_cause"], "caveats": c.get("caveats"),
                    "forward_increment": ev[0] if ev else None})
        print(job, s, budget, c.get("max_batch"), (c.get("binding") or {}).get("phase"), (c.get("binding") or {}).get("piece"),
              round((c.get("binding") or {}).get("per_sample_mib") or 0, 3), round((c.get("binding") or {}).get("fixed_mib") or 0, 2))
    out[job] = {"budget": budget, "batches": bs, "answers": res}
    open(f"logs/capacity-{job}.txt", "w").write("\n\n".join(txt))
json.dump(out, open("logs/capacity.json", "w"), indent=1)
