#!/usr/bin/env bash
# The capacity prediction along the sequence length against a search: for
# each spec, a sequence sweep (one process, the lengths given), then the
# longest length that completes the steps under the budget, found by
# doubling then bisecting in a fresh process per try, and
# compare_memory_reports's prediction from the sweep alone. Prints a table
# (also DIR/sequence-capacity.txt); every report stays in DIR.
#
#   scripts/sequence-capacity-check.sh DIR CASE:PRESET:BATCH:STEPS:BUDGET:L1,L2,...[:REMEDY] ... [-- flags]
#   scripts/sequence-capacity-check.sh /tmp/s delta:small:2:2:60:64,128,256 -- --device cpu
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
dir="${1:?usage: scripts/sequence-capacity-check.sh DIR CASE:PRESET:BATCH:STEPS:BUDGET:LENGTHS[:REMEDY] ... [-- flags]}"
shift
split_at_dashdash "$@"
bin="$MEMDIAG_BUILD_DIR/bin"
[ -x "$bin/memory_diagnostics" ] || die "no $bin/memory_diagnostics: run scripts/build.sh first"
mkdir -p "$dir"
table="$dir/sequence-capacity.txt"
printf '%-36s %8s %10s %10s %8s  %-28s %6s\n' run budget_mib searched predicted apart binds tries | tee "$table"
for spec in "${specs[@]}"; do
  IFS=: read -r case preset batch steps budget lengths remedy <<<"$spec"
  remedy="${remedy:-none}"
  name="$(basename "$case" .json)-$preset-b$batch-$remedy"
  common=(-q --case "$case" --preset "$preset" --batch-size-per-device "$batch" --steps "$steps" --remedy "$remedy" "${extra[@]}")
  mkdir -p "$dir/$name"
  "$bin/memory_diagnostics" "${common[@]}" --sequence-length "$lengths" --memory-limit-mib "$budget" \
    -o "$dir/$name/sweep-seq{seq}.json" --overwrite || die "$name: the sweep did not complete under $budget MiB"
  # Does length L complete under the budget? 0 yes, 1 out of memory.
  fits() {
    local rc=0
    "$bin/memory_diagnostics" "${common[@]}" --sequence-length "$1" --memory-limit-mib "$budget" \
      -o "$dir/$name/try-seq$1.json" --overwrite || rc=$?
    tries=$((tries + 1))
    [ "$rc" = 0 ] && return 0
    [ "$rc" = 3 ] && return 1
    die "$name at length $1: exit $rc"
  }
  tries=0
  lo="${lengths##*,}"
  hi=$((lo * 2))
  while fits "$hi"; do lo=$hi; hi=$((hi * 2)); [ "$hi" -le 1048576 ] || die "$name: no length runs out"; done
  while [ $((hi - lo)) -gt 1 ]; do
    mid=$(((lo + hi) / 2))
    if fits "$mid"; then lo=$mid; else hi=$mid; fi
  done
  "$bin/compare_memory_reports" "$dir/$name"/sweep-seq*.json --format json >"$dir/$name/compare.json" || true
  python3 - "$dir/$name/compare.json" "$name" "$budget" "$lo" "$tries" <<'PY' | tee -a "$table"
import json, sys
cmp, name, budget, found, tries = sys.argv[1:]
found = int(found)
rows = [c for g in json.load(open(cmp))["groups"] for c in g.get("sequence_capacity", [])]
if not rows:
    print(f"{name:36} {budget:>8} {found:>10} {'-':>10} {'-':>8}  {'(no prediction)':28} {tries:>6}")
else:
    c = rows[0]
    p = c["max_sequence_length"]
    apart = f"{100.0 * (p - found) / found:+.2f}%"
    print(f"{name:36} {budget:>8} {found:>10} {p:>10} {apart:>8}  {c['binding_phase']:28} {tries:>6}")
PY
done
