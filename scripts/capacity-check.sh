#!/usr/bin/env bash
# The capacity model against the search, measured: for each case and budget,
# --find-max-batch's answer B (confirmed in fresh processes: B completes,
# B + 1 runs out), the search's own fit of its tries, one plain run at a
# quarter of B and compare_memory_reports's prediction P from it, and P and
# 1.02 x P run in fresh processes under the budget (P must complete where it
# claims 2%, 1.02 x P must run out), and the range the one run's answer
# says it may be off by (caveats.batch_if_all_grows to
# batch_if_activations_grow) with whether B lies in it. With MEMDIAG_CAPACITY_SWEEP=1 an
# unconstrained sweep at B/8, B/4, B/2 and B is kept too, for the model's
# own study. Prints a table (also DIR/capacity.txt); the reports stay in DIR.
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
printf '%-22s %7s %8s %6s %7s %8s %8s %7s %8s %8s %-9s %-9s %17s %-5s\n' case budget found tries search_s \
  fit fit_apart one_b one_run apart at_P at_1.02P one_run_range holds | tee "$table"
# Runs batch B under budget M in a fresh process: fits, oom, or the exit.
fresh() {
  local rc=0
  "$bin/memory_diagnostics" -q "${common[@]}" --batch-size-per-device "$1" --memory-limit-mib "$2" \
    -o "$dir/$name-$2-fresh$1.json" --overwrite || rc=$?
  case "$rc" in 0) echo fits ;; 3) echo oom ;; *) echo "exit$rc" ;; esac
}
for spec in "${specs[@]}"; do
  IFS=: read -r case preset steps budgets <<<"$spec"
  name="$(basename "$case" .json)-$preset-s$steps"
  common=(--case "$case" --preset "$preset" --steps "$steps" "${extra[@]}")
  for b in ${budgets//,/ }; do
    t0=$(date +%s.%N)
    rc=0
    "$bin/memory_diagnostics" -q "${common[@]}" --find-max-batch --memory-limit-mib "$b" \
      -o "$dir/$name-max-$b.json" --overwrite || rc=$?
    t1=$(date +%s.%N)
    [ "$rc" = 0 ] || [ "$rc" = 3 ] || die "$name at $b MiB: --find-max-batch exit $rc"
    found=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["capacity"]["max_batch"])' "$dir/$name-max-$b.json")
    q=$(( found / 4 > 0 ? found / 4 : 1 ))
    "$bin/memory_diagnostics" -q "${common[@]}" --batch-size-per-device "$q" -o "$dir/$name-q$b.json" --overwrite
    "$bin/compare_memory_reports" "$dir/$name-q$b.json" --budget-mib "$b" --format json >"$dir/$name-q$b.cmp.json" || true
    p=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["groups"][0]["capacity"][0]["max_batch"])' \
      "$dir/$name-q$b.cmp.json")
    at_p=$(fresh "$p" "$b")
    p2=$(python3 -c 'import math,sys; print(math.ceil(1.02 * int(sys.argv[1])))' "$p")
    at_p2=$(fresh "$p2" "$b")
    if [ "${MEMDIAG_CAPACITY_SWEEP:-0}" = 1 ]; then
      s=""
      for d in 8 4 2 1; do v=$(( found / d > 0 ? found / d : 1 )); s="${s:+$s,}$v"; done
      "$bin/memory_diagnostics" -q "${common[@]}" --batch-size-per-device "$(tr , '\n' <<<"$s" | sort -nu | paste -sd,)" \
        -o "$dir/$name-sweep$b-b{batch}.json" --overwrite || true
    fi
    python3 - "$dir/$name-max-$b.json" "$name" "$b" "$t0" "$t1" "$q" "$p" "$at_p" "$at_p2" "$dir/$name-q$b.cmp.json" <<'PY' | tee -a "$table"
import json, sys
search, name, budget, t0, t1, q, p, at_p, at_p2, one = sys.argv[1:]
c = json.load(open(search))["capacity"]
cv = json.load(open(one))["groups"][0]["capacity"][0]["caveats"]
lo, hi = cv.get("batch_if_all_grows"), cv.get("batch_if_activations_grow")
# The low end is open where the one run's steps varied in size or kept
# more step by step (caveats.low_end_unknown): only the high end holds.
rng = "-" if hi is None else f"{lo}-{hi}" if lo is not None else f"<={hi}"
holds = "-" if hi is None else "yes" if (lo is None or lo <= c["max_batch"]) and c["max_batch"] <= hi else "NO"
f, fit, p = c["max_batch"], c.get("predicted_max_batch"), int(p)
pct = lambda x: "-" if not f or x is None else f"{100.0 * (x - f) / f:+.2f}%"
conf = "" if c.get("confirmed") else "?"
print(f"{name:22} {budget:>7} {str(f) + conf:>8} {len(c['tries']):>6} {float(t1) - float(t0):7.1f} "
      f"{fit if fit is not None else '-':>8} {pct(fit):>8} {q:>7} {p:>8} {pct(p):>8} {at_p:9} {at_p2:9} {rng:>17} {holds}")
PY
  done
done
