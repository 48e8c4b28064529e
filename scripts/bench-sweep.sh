#!/usr/bin/env bash
# Benchmark: a sweep in one process against the same runs as separate
# processes, wall time of each (best of REPEAT, default 3), and the ratio.
#
#   scripts/bench-sweep.sh reference [flags]   the reference plan (7 runs)
#   scripts/bench-sweep.sh batches [flags]     alpha at batch 1, 2, 4, ..., 128, 2 steps (8 runs)
#
# Extra flags go to every memory_diagnostics call (--device cpu, say). The
# reports of both ways are compared phase by phase (scripts/phase-diff.py).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
what="${1:?usage: scripts/bench-sweep.sh reference|batches [memory_diagnostics flags]}"
shift
repeat="${REPEAT:-3}"
bin="$MEMDIAG_BUILD_DIR/bin/memory_diagnostics"
[ -x "$bin" ] || die "no $bin: run scripts/build.sh first"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# The runs as "name|flags" lines, and the same runs as one sweep.
case "$what" in
  reference)
    runs=("alpha|--case alpha" "beta|--case beta" "gamma|--case gamma"
          "alpha-batch1|--case alpha --batch-size-per-device 1" "alpha-batch4|--case alpha --batch-size-per-device 4"
          "beta-medium|--case beta --preset medium --batch-size-per-device 1" "gamma-steps10|--case gamma --steps 10")
    sweep=(--plan "$MEMDIAG_ROOT/cases/plans/reference.json" --output-dir "$work/sweep") ;;
  batches)
    runs=()
    for b in 1 2 4 8 16 32 64 128; do runs+=("alpha-batch$b|--case alpha --steps 2 --batch-size-per-device $b"); done
    sweep=(--case alpha --steps 2 --batch-size-per-device 1,2,4,8,16,32,64,128 --output-dir "$work/sweep") ;;
  *) die "unknown benchmark '$what' (reference or batches)" ;;
esac

now() { date +%s%N; }
best() { sort -n | head -1; }

sweep_times=() separate_times=()
for ((k = 0; k < repeat; k++)); do
  rm -rf "$work/sweep" "$work/separate"
  mkdir -p "$work/separate"
  t0=$(now)
  "$bin" --quiet "${sweep[@]}" "$@"
  sweep_times+=($(( $(now) - t0 )))
  t0=$(now)
  for r in "${runs[@]}"; do
    # shellcheck disable=SC2086
    "$bin" --quiet ${r#*|} --output "$work/separate/${r%%|*}.json" "$@"
  done
  separate_times+=($(( $(now) - t0 )))
done
s=$(printf '%s\n' "${sweep_times[@]}" | best)
p=$(printf '%s\n' "${separate_times[@]}" | best)
python3 -c 'import sys; w, n, s, p, r = sys.argv[1:]; s, p = int(s) / 1e9, int(p) / 1e9
print(f"bench-sweep {w}: {n} runs; one process {s:.2f} s, separate processes {p:.2f} s, ratio {s / p:.2f} (best of {r})")' \
  "$what" "${#runs[@]}" "$s" "$p" "$repeat"
python3 "$MEMDIAG_ROOT/scripts/phase-diff.py" "$work/separate" "$work/sweep"
