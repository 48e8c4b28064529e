import json, subprocess, sys, os
CMP = "/work/main/build/bin/compare_memory_reports"
JOBS = {"effb0": (8, 600), "densenet": (8, 800), "mnv3": (8, 600), "resnext": (8, 1000), "gpt2": (4, 1200), "bert": (4, 600)}
def ask(path, N):
    out = subprocess.run([CMP, path, "--budget-mib", str(N), "--format", "json"], capture_output=True, text=True)
    d = json.loads(out.stdout); c = d["groups"][0]["capacity"][0]; cv = c.get("caveats") or {}
    return {"max_batch": c["max_batch"], "range": [cv.get("batch_if_all_grows"), cv.get("batch_if_activations_grow")],
            "binding": c["binding"].get("phase"), "piece": c["binding"].get("piece"),
            "node": (c["binding"].get("node") or {}).get("name"), "fixed": round(c["binding"]["fixed_mib"], 2),
            "per_sample": round(c["binding"]["per_sample_mib"], 4), "text": c["text"]}
res = {}
for j, (B, N) in JOBS.items():
    src = f"r/{j}-b{B}.json"
    d = json.load(open(src))
    d["model"].pop("forward_profile", None)
    bp = d["model"].get("backward_profile")
    if bp: bp.pop("held_mib", None); bp.pop("operands_mib", None)
    prev = f"r/{j}-b{B}-prev.json"; json.dump(d, open(prev, "w"))
    res[j] = {"B": B, "N": N, "now": ask(src, N), "prev": ask(prev, N)}
    print(j, B, N, res[j]["now"]["max_batch"], res[j]["now"]["range"], res[j]["now"]["binding"], res[j]["now"]["piece"], res[j]["now"]["node"],
          "fixed", res[j]["now"]["fixed"], "ps", res[j]["now"]["per_sample"], "| prev", res[j]["prev"]["max_batch"], res[j]["prev"]["range"],
          res[j]["prev"]["fixed"], res[j]["prev"]["per_sample"])
json.dump(res, open("pred.json", "w"), indent=1)
