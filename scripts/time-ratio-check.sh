#!/usr/bin/env bash
# Remedy time ratios by a run's place in its process: the same remedies run
# in the remedies plan (baseline first), in a sweep with the remedy first,
# and in a sweep with the baseline first. Prints, per case and remedy, the
# time per step against the baseline's in each (median of the steps after
# the first, the spread in brackets). Ratios comparable across positions
# mean the first calls of each kernel no longer land on one run.
#
#   scripts/time-ratio-check.sh OUT_DIR [memory_diagnostics flags]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
out="${1:?usage: scripts/time-ratio-check.sh OUT_DIR [memory_diagnostics flags]}"
shift
bin="$MEMDIAG_BUILD_DIR/bin"
[ -x "$bin/memory_diagnostics" ] || die "no $bin/memory_diagnostics: run scripts/build.sh first"
rm -rf "$out" && mkdir -p "$out"
"$bin/memory_diagnostics" --plan "$MEMDIAG_ROOT/cases/plans/remedies.json" --output-dir "$out/plan" -q "$@"
for c in alpha beta; do
  "$bin/memory_diagnostics" --case "$c" --remedy checkpoint,bf16,none --steps 6 --output-dir "$out/$c-remedy-first" -q "$@"
  "$bin/memory_diagnostics" --case "$c" --remedy none,checkpoint,bf16 --steps 6 --output-dir "$out/$c-baseline-first" -q "$@"
done
for d in "$out"/*/; do
  "$bin/compare_memory_reports" "$d" --format json -o "$d/compare.json" || true
done
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
print(f"{'where':<22} {'case':<6} {'remedy':<14} {'ms/step':>10} {'spread':>17} {'time ratio':>10}")
for d in sorted(os.listdir(out)):
    p = os.path.join(out, d, "compare.json")
    if not os.path.exists(p):
        continue
    for g in json.load(open(p))["groups"]:
        for r in g["remedies"]:
            if r["remedy"].split("=")[0] not in ("checkpoint", "bf16"):
                continue
            spread = f"{r['ms_per_step_min']:.2f}-{r['ms_per_step_max']:.2f}" if r["ms_per_step_min"] is not None else "-"
            ratio = f"x{r['time_ratio']:.2f}" if r["time_ratio"] is not None else "-"
            print(f"{d:<22} {g['case']:<6} {r['remedy']:<14} {r['ms_per_step']:>10.3f} {spread:>17} {ratio:>10}")
PY
