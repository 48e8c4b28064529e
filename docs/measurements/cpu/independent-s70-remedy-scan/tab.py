"""Tabulates logs/cmp-*.json of the scan points and checks invariants I1-I5 of EXPECTED.md.
python3 tab.py > logs/tables.md"""
import json, glob, re, os
KW = {  # would-not-help keyword -> remedy labels it speaks of
    "lighter optimizer": ["sgd"], "Activation checkpointing": ["checkpointing"],
    "smaller batch": ["accumulate=4"], "micro-batch": ["accumulate=4"],
    "precision": ["autocast-bf16"], "bf16": ["autocast-bf16"], "Freez": ["freeze-backbone", "freeze-embeddings"],
}
NM = {"checkpoint": "checkpointing", "accumulate": "accumulate=4", "autocast-bf16": "autocast-bf16"}
def key(f):
    m = re.match(r"logs/cmp-([A-Z])-b(\d+)-s(\d+)\.json", f); return (m[1], int(m[3]) != 6, int(m[2]), int(m[3]))
fm = lambda x: '-' if x is None else '%.2f' % x
files = sorted([f for f in glob.glob("logs/cmp-*-b*-s*.json")], key=key)
problems = []
cur = None
for f in files:
    P, _, B, S = key(f)
    d = json.load(open(f)); txt = open(f[:-5] + ".txt").read()
    if len(d["groups"]) != 1: problems.append(f"{f}: {len(d['groups'])} groups")
    g = d["groups"][0]
    if P != cur:
        cur = P
        print(f"\n### {P}\n")
        print("| point | cause (margin; top vs runner-up MiB) | base peak (phase) | remedy | peak change | cause MiB base -> remedy | reduces | max loss diff (tol) | changes learning | peak phase | best? |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
    dec = g["decision"]; top = dec.get("top") or {}; ru = dec.get("runner_up") or {}
    cause = f"{g['dominant_cause']} ({dec.get('rule')}, x{dec.get('margin') or 0:.2f}; {top.get('cause','-')} {top.get('mib',0):.1f} vs {ru.get('cause','-')} {ru.get('mib',0):.1f})"
    rem = g["remedies"]; best = g["best_remedy"]; low = g["lowest_peak_remedy"]
    bp = rem[0]["baseline_peak_mib"] if rem else None
    for i, r in enumerate(rem):
        tag = ("BEST" if i == best else "") + (" lowest" if i == low and i != best else "")
        first = i == 0
        print(f"| {'b%d s%d' % (B, S) if first else ''} | {cause if first else ''} | {('%.1f (%s)' % (bp, r['baseline_peak_phase'])) if first else ''} | {r['remedy']} | {r['peak_change_mib']:+.1f} ({100*r['peak_change_fraction']:+.1f}%) | {fm(r['baseline_cause_mib'])} -> {fm(r['cause_mib'])} | {'yes' if r['reduces_cause'] else 'no'} | {100*r['max_loss_diff']:.4f}% ({100*r['loss_tolerance']:.2f}%) | {'YES' if r['changes_training'] else 'no'} | {r['peak_phase']} | {tag} |")
        # consistency of the reduces flag with its figures
        if r["baseline_cause_mib"] is not None and r["cause_mib"] is not None and (r["cause_mib"] < 0.9 * r["baseline_cause_mib"]) != r["reduces_cause"]:
            problems.append(f"{P} b{B} s{S}: {r['remedy']} reduces={r['reduces_cause']} but {r['baseline_cause_mib']:.2f}->{r['cause_mib']:.2f}")
        # I2: a learning change said in words
        if r["changes_training"]:
            said = any(r["remedy"] in ln and "changes what the model learns" in ln for ln in txt.splitlines()) or \
                   re.search(r"[Cc]hanges what the model learns too: [^\n]*" + re.escape(r["remedy"]), txt)
            if not said: problems.append(f"{P} b{B} s{S}: I2 {r['remedy']} changes_training but not said in words")
        if (r["max_loss_diff"] > r["loss_tolerance"]) != r["changes_training"]:
            problems.append(f"{P} b{B} s{S}: {r['remedy']} changes_training={r['changes_training']} vs diff {r['max_loss_diff']} tol {r['loss_tolerance']}")
    # I1
    keep = [i for i, r in enumerate(rem) if r["reduces_cause"] and not r["changes_training"] and r["status"] == "complete"]
    if best is not None:
        r = rem[best]
        if not r["reduces_cause"] or r["changes_training"]: problems.append(f"{P} b{B} s{S}: I1 best {r['remedy']} reduces={r['reduces_cause']} changes={r['changes_training']}")
        if keep and min(keep, key=lambda i: rem[i]["peak_mib"]) != best: problems.append(f"{P} b{B} s{S}: I1 best is not the lowest keeping row")
    elif keep: problems.append(f"{P} b{B} s{S}: I1 no best though {[rem[i]['remedy'] for i in keep]} reduce and keep")
    # I3
    for ln in g["not_helpful"]:
        for kw, labs in KW.items():
            if kw.lower() in ln.lower():
                for r in rem:
                    if r["remedy"] in labs and r["peak_change_fraction"] < -0.05 and "Measured here" not in ln:
                        problems.append(f"{P} b{B} s{S}: I3 would-not-help '{ln[:60]}...' beside {r['remedy']} measured {100*r['peak_change_fraction']:+.1f}%")
    # I5
    for nm in g["remedies_not_measured"]:
        if NM.get(nm) in [r["remedy"] for r in rem]: problems.append(f"{P} b{B} s{S}: I5 {nm} offered as not measured")
    print(f"| | best text: {(g['best_remedy_text'] or '-')[:400]} | | | | | | | | | |")
    nh = "; ".join(ln[:70] + ("[Measured here...]" if "Measured here" in ln else "") for ln in g["not_helpful"])
    print(f"| | would not help: {nh} | | | | | | | | | |")
    print(f"| | not measured: {', '.join(g['remedies_not_measured'])} | | | | | | | | | |")
print("\n### automatic checks\n")
for p in problems: print("-", p)
if not problems: print("none")
