import json, subprocess, sys, os
CMP = "/work/main/build/bin/compare_memory_reports"
budget = sys.argv[1]; reps = sys.argv[2:]
d = json.loads(subprocess.run([CMP, *reps, "--budget-mib", budget, "--format", "json"], capture_output=True, text=True).stdout)
g = d["groups"][0]
if g.get("step_capacity"):
    print("STEP_CAPACITY", json.dumps(g["step_capacity"])[:1500])
c = g["capacity"][0]; cv = c["caveats"]; b = c["binding"]
print(json.dumps({"P": c["max_batch"], "low": cv["batch_if_all_grows"], "high": cv["batch_if_activations_grow"],
  "fixed": round(b["fixed_mib"], 3), "per_sample": round(b["per_sample_mib"], 4), "phase": b["phase"],
  "node": b.get("node"), "fitted": c["fitted_batches"], "micro": c["micro_batches"]}))
print(c["text"])
