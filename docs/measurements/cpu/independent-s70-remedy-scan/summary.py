"""Compact scan tables for RESULTS.md: python3 summary.py > logs/summary.md"""
import json, glob, re
ORDER = dict(A=["checkpointing", "autocast-bf16", "sgd"], B=["accumulate=4", "sgd", "freeze-embeddings"],
             C=["sgd", "freeze-backbone", "autocast-bf16"], F=["checkpointing", "autocast-bf16", "accumulate=4", "sgd"])
SHORT = {"activations": "act", "optimizer_state": "state", "inconclusive": "inconcl."}
def key(f):
    P, B, S = re.match(r"logs/cmp-([A-Z])-b(\d+)-s(\d+)\.json", f).groups(); return (P, int(S) != 6, int(B), int(S))
for P in "ABCF":
    fs = sorted([f for f in glob.glob(f"logs/cmp-{P}-b*-s*.json")], key=key)
    print(f"\n#### {P}\n")
    print("| point | cause (margin) | base peak | " + " | ".join(ORDER[P]) + " | best / lowest-peak line | would-not-help vs measured |")
    print("|---" * (5 + len(ORDER[P])) + "|")
    for f in fs:
        _, _, B, S = key(f)
        g = json.load(open(f))["groups"][0]; rem = {r["remedy"]: r for r in g["remedies"]}
        dec = g["decision"]; cells = []
        for v in ORDER[P]:
            r = rem[v]
            cm = "" if r["cause_mib"] is None else f"{r['baseline_cause_mib']:.0f}->{r['cause_mib']:.1f}"
            cells.append(f"{100*r['peak_change_fraction']:+.1f}%; {cm} {'**yes**' if r['reduces_cause'] else 'no'}; loss {100*r['max_loss_diff']:.4g}%{' **CHANGES**' if r['changes_training'] else ''}")
        bt = g["best_remedy_text"] or ""
        if bt.startswith("measured best remedy: "): bl = "best " + bt.split()[3]
        elif bt.startswith("no measured remedy"): bl = "none keeps; lowest " + bt.split("the lowest peak: ")[1].split()[0]
        elif bt: bl = "no best; " + bt[:40]
        else: bl = "-"
        nh = []
        for ln in g["not_helpful"]:
            name = ln.split(":")[0][:28]
            nh.append(name + (" [+Measured here]" if "Measured here" in ln else ""))
        print(f"| b{B} s{S} | {SHORT.get(g['dominant_cause'], g['dominant_cause'])} x{dec.get('margin') or 0:.2f} | {g['remedies'][0]['baseline_peak_mib']:.1f} ({g['remedies'][0]['baseline_peak_phase']}) | " + " | ".join(cells) + f" | {bl} | {'; '.join(nh) or '(none printed)'} |")
