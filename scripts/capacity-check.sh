#!/usr/bin/env bash
# The capacity model against the search, measured: for each case and budget,
# one plain run at the case's own batch, compare_memory_reports's prediction
# from it, and --find-max-batch's answer (confirmed in fresh processes).
# Prints a table (also DIR/capacity.txt); the reports stay in DIR.
#
#   scripts/capacity-check.sh DIR CASE:PRESET:STEPS:BUDGET[,BUDGET...] ... [-- memory_diagnostics flags]
#   scripts/capacity-check.sh /tmp/c alpha:small:2:40,60 beta:small:1:290,292 -- --device cpu
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
dir="${1:?usage: scripts/capacity-check.sh DIR CASE:PRESET:STEPS:BUDGETS ... [-- flags]}"
shift
split_at_dashdash "$@"
bin="$MEMDIAG_BUILD_DIR/bin"
[ -x "$bin/memory_diagnostics" ] || die "no $bin/memory_diagnostics: run scripts/build.sh first"
mkdir -p "$dir"
table="$dir/capacity.txt"
printf '%-28s %8s %10s %10s %8s  %-40s %8s\n' case budget_mib searched predicted apart binds search_s | tee "$table"
for spec in "${specs[@]}"; do
  IFS=: read -r case preset steps budgets <<<"$spec"
  name="$(basename "$case" .json)-$preset-s$steps"
  "$bin/memory_diagnostics" -q --case "$case" --preset "$preset" --steps "$steps" "${extra[@]}" -o "$dir/$name.json"
  for b in ${budgets//,/ }; do
    t0=$(date +%s.%N)
    rc=0
    "$bin/memory_diagnostics" -q --case "$case" --preset "$preset" --steps "$steps" "${extra[@]}" \
      --find-max-batch --memory-limit-mib "$b" -o "$dir/$name-max-$b.json" || rc=$?
    t1=$(date +%s.%N)
    [ "$rc" = 0 ] || [ "$rc" = 3 ] || die "$name at $b MiB: --find-max-batch exit $rc"
    "$bin/compare_memory_reports" "$dir/$name.json" --budget-mib "$b" --format json >"$dir/$name-$b.cmp.json" || true
    python3 - "$dir/$name-max-$b.json" "$dir/$name-$b.cmp.json" "$name" "$b" "$t0" "$t1" <<'PY' | tee -a "$table"
import json, sys
search, cmp, name, budget, t0, t1 = sys.argv[1:]
found = json.load(open(search))["capacity"]
c = json.load(open(cmp))["groups"][0]["capacity"][0]
f, p = found["max_batch"], c["max_batch"]
apart = "-" if f == 0 else f"{100.0 * (p - f) / f:+.2f}%"
binds = c["binding"]["phase"] + ("" if c["binding"]["piece"] == "whole" else " (" + c["binding"]["piece"] + ")")
conf = "" if found.get("confirmed") else " (unconfirmed)"
print(f"{name:28} {budget:>8} {str(f) + conf:>10} {p:>10} {apart:>8}  {binds:40} {float(t1) - float(t0):8.1f}")
PY
  done
done
