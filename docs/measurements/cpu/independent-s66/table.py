import json
c = {}
for l in open("counts.jsonl"):
    if l.startswith("{"):
        d = json.loads(l); c[(d["job"], d["batch"])] = d["peak_mib"]
truth = {}
for f in ["logs/truthA.log", "logs/truthB.log", "logs/truthC.log", "logs/truthD.log"]:
    for l in open(f):
        if l.startswith("{"):
            d = json.loads(l); truth[(d["job"], d["N"])] = d
names = {"effb0": "efficientnet_b0 64px AdamW", "densenet": "densenet121 64px SGD-mom", "mnv3": "mobilenet_v3_large 96px AdamW",
         "resnext": "resnext50_32x4d 64px AdamW", "gpt2": "GPT2LMHead 4L/256/seq128 AdamW", "bert": "BertForSeqCls 4L/256/seq128 AdamW"}
def rows(pred):
    out = []
    for j, r in pred.items():
        N = float(r["N"]); t = truth[(j, N)]; T = t["T"]; Pn = r["now"]["max_batch"]; Pp = r["prev"]["max_batch"]
        pk = c[(j, Pn)]; pkp = c[(j, Pp)]
        out.append(f"| {names[j]} | {r['B']} | {int(N)} | {T} | {t['peak_T']:.1f} / {t['peak_T1']:.1f} | {Pn} | {Pp} | "
                   f"{(Pn-T)/T:+.1%} | {(Pp-T)/T:+.1%} | {r['now']['range'][0]}-{r['now']['range'][1]} (prev {r['prev']['range'][0]}-{r['prev']['range'][1]}) | "
                   f"{'yes' if pk <= N else '**NO**'} ({pk:.1f}) | {'yes' if pkp <= N else '**NO**'} ({pkp:.1f}) |")
    return out
hdr = ("| job | B | N MiB | truth T | counted peak at T / T+1 (MiB) | P now | P fields removed | (P-T)/T now | (P-T)/T removed | stated range (caveats) | P now fits? (peak at P) | P removed fits? (peak) |\n"
       "|---|---|---|---|---|---|---|---|---|---|---|---|")
print(hdr); print("\n".join(rows(json.load(open("pred.json")))))
print("\nSupplementary, a second budget per job (truth ~15x B), same recordings:\n")
print(hdr); print("\n".join(rows(json.load(open("pred2.json")))))
