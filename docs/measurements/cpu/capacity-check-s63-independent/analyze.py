"""Table: each counted run (logs/count.jsonl) against the budget it was measured for."""
import json
rows = [json.loads(l) for l in open("logs/count.jsonl")]
for r in rows:
    unit = r["batch"] * r["seq"] if r["job"] in ("optvar", "optvareager", "t5var") and r["seq"] and r["batch"] == 4 else r["batch"]
    print(f'{r["job"]:10s} batch {r["batch"]:6d} seq {r["seq"]:5d} units {unit:6d} steps {r["steps"]} peak {r["peak_mib"]:9.3f} MiB  per step {r["step_peaks_mib"]}  {r["seconds"]} s')
