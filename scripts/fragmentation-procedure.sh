#!/usr/bin/env bash
# "Out of memory with memory free", measured (CUDA): epsilon, whose batch
# grows step by step, run under a range of memory limits with the
# allocator's defaults and with expandable_segments:True; the lowest limit
# where expandable segments complete and the defaults run out is the
# fragmentation limit. At that limit: one run per setting (the reports the
# comparer names fragmentation from), the largest batch per setting
# (--find-max-batch), and alpha, beta and gamma under the same settings.
#
#   scripts/fragmentation-procedure.sh DIR [LOW HIGH STEP] [memory_diagnostics flags]
#
# DIR/scan: the limit scan; DIR/runs: one run per setting at the limit;
# DIR/max-batch: the searches; DIR/cases: alpha, beta, gamma per setting;
# DIR/summary.txt: what each run said.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
dir="${1:?usage: scripts/fragmentation-procedure.sh DIR [LOW HIGH STEP] [flags]}"
shift
low="${1:-2500}" high="${2:-2800}" step="${3:-20}"
[ "$#" -ge 3 ] && shift 3 || set --
extra=("$@")
bin="$MEMDIAG_BUILD_DIR/bin"
[ -x "$bin/memory_diagnostics" ] || die "no $bin/memory_diagnostics: run scripts/build.sh first"
mkdir -p "$dir/scan" "$dir/runs" "$dir/max-batch" "$dir/cases"
summary="$dir/summary.txt"
: > "$summary"
case_flags=(--case epsilon --preset medium)
settings=(none expandable-segments max-split=32 gc-threshold=60)

run() {  # OUT flags...: one run; the exit status is what the run said (0 complete, 3 oom)
  local out="$1"; shift
  local rc=0
  "$bin/memory_diagnostics" -q "$@" "${extra[@]}" -o "$out" || rc=$?
  [ "$rc" = 0 ] || [ "$rc" = 3 ] || die "$out: exit $rc"
  echo "$rc"
}

say "scanning limits $low..$high MiB (step $step) with the defaults and expandable segments"
limit=""
for ((l = low; l <= high; l += step)); do
  d=$(run "$dir/scan/default-$l.json" "${case_flags[@]}" --memory-limit-mib "$l")
  e=$(run "$dir/scan/expandable-$l.json" "${case_flags[@]}" --memory-limit-mib "$l" --remedy expandable-segments)
  echo "limit $l: defaults exit $d, expandable segments exit $e" >> "$summary"
  if [ -z "$limit" ] && [ "$d" = 3 ] && [ "$e" = 0 ]; then limit="$l"; fi
done
[ -n "$limit" ] || die "no limit in $low..$high where the defaults run out and expandable segments complete"
echo "fragmentation limit: $limit MiB" >> "$summary"
say "limit $limit MiB: one run per setting, then the largest batch per setting"
for s in "${settings[@]}"; do
  name="${s//=/}"
  rc=$(run "$dir/runs/epsilon-$name.json" "${case_flags[@]}" --memory-limit-mib "$limit" --remedy "$s")
  echo "epsilon medium $s at $limit MiB: exit $rc" >> "$summary"
  rc=$(run "$dir/max-batch/epsilon-$name.json" "${case_flags[@]}" --memory-limit-mib "$limit" --remedy "$s" \
         --find-max-batch)
  echo "epsilon medium $s --find-max-batch at $limit MiB: exit $rc" >> "$summary"
done
say "alpha, beta and gamma under the same settings (one process; each setting in a child of its own)"
"$bin/memory_diagnostics" -q --case alpha,beta,gamma --remedy "$(IFS=,; echo "${settings[*]}")" \
  --memory-limit-mib 16384 "${extra[@]}" --output-dir "$dir/cases" || die "the cases sweep failed"
echo "cases sweep: done" >> "$summary"
cat "$summary"
