#!/usr/bin/env bash
# "When it has already run out of memory", measured: one run out of memory
# in each phase (the weights moved to the device, forward, backward, the
# first step(), a later step of a run whose graph grows), then the largest
# batch of alpha (small and medium presets) searched under a 4096 MiB limit
# beside the comparer's prediction from a plain run at a quarter of it.
# Reports go to DIR (DIR/oom, DIR/max-batch); timings to DIR/times.txt.
# Extra arguments go to every memory_diagnostics call (e.g. --device cpu).
#
#   scripts/oom-procedure.sh reports/h200-oom
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
dir="${1:?usage: scripts/oom-procedure.sh DIR [memory_diagnostics flags]}"
shift
bin="$MEMDIAG_BUILD_DIR/bin"
[ -x "$bin/memory_diagnostics" ] || die "no $bin/memory_diagnostics: run scripts/build.sh first"
mkdir -p "$dir/oom" "$dir/max-batch"
times="$dir/times.txt"
: > "$times"

oom() {  # NAME flags...: a run expected to run out of memory (exit 3)
  local name="$1"; shift
  local rc=0
  "$bin/memory_diagnostics" -q "$@" "${extra[@]}" -o "$dir/oom/$name.json" || rc=$?
  [ "$rc" = 3 ] || die "$name: exit $rc, expected 3 (out of memory)"
}
extra=("$@")
oom 1-model_ready --case beta --preset medium --memory-limit-mib 200
oom 2-forward --case alpha --preset large --memory-limit-mib 2048
oom 3-backward --case beta --preset medium --memory-limit-mib 450
oom 4-step --case beta --preset medium --memory-limit-mib 900
oom 5-later-step --case gamma --preset large --steps 30 --memory-limit-mib 6000
"$bin/compare_memory_reports" "$dir/oom"

for preset in small medium; do
  start=$(date +%s.%N)
  "$bin/memory_diagnostics" --case alpha --preset "$preset" --find-max-batch --memory-limit-mib 4096 \
      "${extra[@]}" -o "$dir/max-batch/alpha-$preset-max-batch.json"
  end=$(date +%s.%N)
  found=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["capacity"]["max_batch"])' \
      "$dir/max-batch/alpha-$preset-max-batch.json")
  "$bin/memory_diagnostics" -q --case alpha --preset "$preset" --batch-size-per-device $((found / 4)) \
      "${extra[@]}" -o "$dir/max-batch/alpha-$preset-quarter.json"
  start2=$(date +%s.%N)
  predicted=$("$bin/compare_memory_reports" "$dir/max-batch/alpha-$preset-quarter.json" --budget-mib 4096 \
      --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["groups"][0]["capacity"][0]["max_batch"])')
  end2=$(date +%s.%N)
  python3 - "$preset" "$found" "$predicted" "$start" "$end" "$start2" "$end2" >> "$times" <<'PY'
import sys
preset, found, predicted = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
search_s, predict_s = float(sys.argv[5]) - float(sys.argv[4]), float(sys.argv[7]) - float(sys.argv[6])
print(f"alpha {preset}: search {found} in {search_s:.1f} s; predicted {predicted} from batch {found // 4} "
      f"in {predict_s:.2f} s ({100 * (predicted - found) / found:+.1f}%)")
PY
done
cat "$times"
