#!/usr/bin/env python3
"""Phase-by-phase difference between two sets of memdiag reports.

    scripts/phase-diff.py DIR_A DIR_B [--tolerance MIB]

Pairs the *.json reports of the two directories by file name and prints, per
pair, the largest absolute difference in allocated, reserved and peak MiB
over all samples (matched by phase and step), and whether the model's
parameter bytes and the sample sequence agree. Exits 1 when any difference
exceeds the tolerance (default 0.01 MiB) or a report has no partner.
"""
import argparse
import json
import os
import sys


def samples(report):
    return {(s["phase"], s["step"]): s for s in report["samples"]}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--tolerance", type=float, default=0.01, help="MiB (default 0.01)")
    args = ap.parse_args()
    names_a = {f for f in os.listdir(args.a) if f.endswith(".json")}
    names_b = {f for f in os.listdir(args.b) if f.endswith(".json")}
    bad = False
    for name in sorted(names_a ^ names_b):
        print(f"{name}: only in {args.a if name in names_a else args.b}")
        bad = True
    print(f"{'report':24s} {'samples':>7s} {'alloc':>9s} {'reserved':>9s} {'peak':>9s}  params")
    for name in sorted(names_a & names_b):
        ra = json.load(open(os.path.join(args.a, name)))
        rb = json.load(open(os.path.join(args.b, name)))
        sa, sb = samples(ra), samples(rb)
        worst = {"allocated_mib": 0.0, "reserved_mib": 0.0, "peak_allocated_mib": 0.0}
        for key in sa.keys() & sb.keys():
            for field in worst:
                x, y = sa[key].get(field), sb[key].get(field)
                if x is not None and y is not None:
                    worst[field] = max(worst[field], abs(x - y))
        same_shape = list(sa) == list(sb)
        same_params = ra["model"]["parameter_bytes"] == rb["model"]["parameter_bytes"]
        over = any(v > args.tolerance for v in worst.values())
        bad = bad or over or not same_shape or not same_params
        print(f"{name:24s} {('same' if same_shape else 'DIFFER'):>7s} {worst['allocated_mib']:9.4f} "
              f"{worst['reserved_mib']:9.4f} {worst['peak_allocated_mib']:9.4f}  "
              f"{'same' if same_params else 'DIFFER'}")
    print("max difference within %.3f MiB: %s" % (args.tolerance, "no" if bad else "yes"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
