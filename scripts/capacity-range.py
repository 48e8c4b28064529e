#!/usr/bin/env python3
"""One run's range against the search, judged again from the reports a
scripts/capacity-check.sh DIR left: for each NAME-max-B.json (the search,
confirmed in fresh processes) and NAME-qB.json (one plain run at a quarter
of its answer), compare_memory_reports's prediction from the one run at
budget B, the range it says the answer lies in (caveats.batch_if_all_grows
to batch_if_activations_grow; "open" where its low end cannot be told), and
whether the search's answer lies in it; then the search's own answer from
its traced try (the allocator replayed at the budget, before fresh
processes checked it: searched.replayed_max_batch of the comparer's reading
of the search's report) and how far it is from the answer, beside the
lines through the search's tries (that reading's max_batch).

    python3 scripts/capacity-range.py DIR [DIR ...]

Exits 1 when an answer lies outside its range, or the search's replay is
more than 2% from it. Needs no device: the
comparer reads the reports with today's rules.
"""
import glob
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CMP = os.path.join(os.environ.get("MEMDIAG_BUILD_DIR", os.path.join(ROOT, "build")), "bin", "compare_memory_reports")


def main(dirs):
    if not dirs:
        sys.exit("usage: scripts/capacity-range.py DIR [DIR ...]")
    if not os.access(CMP, os.X_OK):
        sys.exit(f"memdiag: no {CMP}: run scripts/build.sh first")
    print(f"{'case':22s} {'budget':>7s} {'found':>7s} {'one_b':>6s} {'one_run':>8s} {'apart':>8s} "
          f"{'low':>7s} {'high':>7s} {'low end':16s} {'in range':8s} {'replayed':>8s} {'apart':>8s}")
    outside = 0
    for d in dirs:
        for search in sorted(glob.glob(os.path.join(d, "*-max-*.json"))):
            m = re.match(r"(.*)-max-(\d+)\.json$", os.path.basename(search))
            name, budget = m.group(1), m.group(2)
            one = os.path.join(d, f"{name}-q{budget}.json")
            if not os.path.exists(one):
                continue
            found = json.load(open(search))["capacity"]["max_batch"]
            p = subprocess.run([CMP, one, "--format", "json", "--budget-mib", budget], capture_output=True, text=True)
            c = json.loads(p.stdout)["groups"][0]["capacity"][0]
            cv, pred = c["caveats"], c["max_batch"]
            lo, hi = cv["batch_if_all_grows"], cv["batch_if_activations_grow"]
            ok = hi is not None and found <= hi and (lo is None or lo <= found)
            hi = hi if hi is not None else -1  # no range (a traced run's replay, or nothing fits)
            p = subprocess.run([CMP, search, "--format", "json", "--budget-mib", budget], capture_output=True, text=True)
            own = json.loads(p.stdout)["groups"][0]["capacity"][0]
            r = (own.get("searched") or {}).get("replayed_max_batch")
            lines = own["max_batch"]
            replay_ok = r is not None and abs(r - found) <= found / 50
            outside += (not ok) + (not replay_ok)
            replay = f"{r:8d} {100.0 * (r - found) / found:+7.2f}%" if r is not None else f"{'none':>8s} {'-':>8s}"
            print(f"{name:22s} {budget:>7s} {found:7d} {c['fitted_batches'][-1]:6d} {pred:8d} "
                  f"{100.0 * (pred - found) / found:+7.2f}% {lo if lo is not None else 'open':>7} {hi:7d} "
                  f"{cv['low_end_unknown'] or 'known':16s} {'yes' if ok else 'NO':8s} {replay} "
                  f"{lines:8d} {100.0 * (lines - found) / found:+7.2f}%")
    return 1 if outside else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
