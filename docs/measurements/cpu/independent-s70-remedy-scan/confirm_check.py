"""The comparer's 'to confirm' runs (expected peak at another batch) against the peaks this scan measured.
python3 confirm_check.py > logs/confirm-check.txt"""
import json, glob, re
peaks = {}
for f in glob.glob("logs/cmp-*-b*-s6.json"):
    P, B = re.match(r"logs/cmp-([A-Z])-b(\d+)-s6", f).groups()
    for r in json.load(open(f))["groups"][0]["runs"]:
        if r.get("remedy") in (None, "none") or "base" in r.get("source", ""):
            pass
    g = json.load(open(f))["groups"][0]
    peaks[(P, int(B))] = g["remedies"][0]["baseline_peak_mib"]
for f in sorted(glob.glob("logs/cmp-*-b*-s6.json")):
    P, B = re.match(r"logs/cmp-([A-Z])-b(\d+)-s6", f).groups()
    g = json.load(open(f))["groups"][0]
    for c in g["confirming_runs"]:
        m = re.search(r"batch (\d+)", c.get("change") or "")
        e = (c.get("expected") or {}).get("peak_mib")
        if m and e is not None:
            tb = int(m[1]); meas = peaks.get((P, tb))
            print(f"{P} b{B}: expects batch {tb} peak {e:.1f} MiB; measured {'%.1f' % meas if meas else 'not in scan'}" + (f" ({100*(e-meas)/meas:+.1f}%)" if meas else ""))
