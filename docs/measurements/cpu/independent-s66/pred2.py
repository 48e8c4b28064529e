import json, sys
sys.argv = ["x"]
exec(open("pred.py").read().split("res = {}")[0])
JOBS2 = {"effb0": (8, 900), "densenet": (8, 1300), "mnv3": (8, 1000), "resnext": (8, 1400), "gpt2": (4, 1800), "bert": (4, 900)}
res = {}
for j, (B, N) in JOBS2.items():
    res[j] = {"B": B, "N": N, "now": ask(f"r/{j}-b{B}.json", N), "prev": ask(f"r/{j}-b{B}-prev.json", N)}
    print(j, N, res[j]["now"]["max_batch"], res[j]["now"]["range"], "| prev", res[j]["prev"]["max_batch"], res[j]["prev"]["range"])
json.dump(res, open("pred2.json", "w"), indent=1)
# primary needs vs counted at B
for j, (B, N) in JOBS2.items():
    out = subprocess.run([CMP, f"r/{j}-b{B}.json", "--budget-mib", "1000", "--format", "json"], capture_output=True, text=True)
    print(j, "primary_needs_mib", json.loads(out.stdout)["groups"][0]["capacity"][0]["primary_needs_mib"])
