#!/usr/bin/env bash
# Data-parallel runs on N ranks (default 2), launched as users launch them:
#   torchrun --nproc-per-node=N --no-python build/bin/memory_diagnostics ...
# alpha with equal local batches and with rank-zero extra samples, beta with
# and without ZeRO-1 optimizer-state sharding, and gamma; one report per rank
# in DIR, then the comparison. Extra arguments go to every run.
# Without torchrun (CI machines), the ranks are started with the same
# variables torchrun sets.
#
#   scripts/distributed-procedure.sh reports/2rank [--device cpu]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
dir="${1:?usage: scripts/distributed-procedure.sh DIR [memory_diagnostics flags]}"
shift
n="${MEMDIAG_RANKS:-2}"
mkdir -p "$dir"
bin="$MEMDIAG_BUILD_DIR/bin"
[ -x "$bin/memory_diagnostics" ] || die "no $bin/memory_diagnostics: run scripts/build.sh first"
export NCCL_NVLS_ENABLE=0

launch() {
  local t0 ms
  t0=$(date +%s%N)
  if command -v torchrun >/dev/null 2>&1; then
    torchrun --nproc-per-node="$n" --no-python "$bin/memory_diagnostics" --quiet "$@"
  else
    local port=$((20000 + RANDOM % 20000)) pids=() r
    for ((r = 0; r < n; r++)); do
      RANK=$r LOCAL_RANK=$r WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
        "$bin/memory_diagnostics" --quiet "$@" &
      pids+=($!)
    done
    for r in "${pids[@]}"; do wait "$r"; done
  fi
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  printf 'wall %4d.%03d s  %d ranks: memory_diagnostics %s\n' $((ms / 1000)) $((ms % 1000)) "$n" "$*"
}

launch --case alpha --output "$dir/alpha-{rank}.json" "$@"
launch --case alpha --rank-zero-extra-samples 512 --output "$dir/alpha-extra-{rank}.json" "$@"
launch --case beta --output "$dir/beta-{rank}.json" "$@"
launch --case beta --shard-optimizer-state --output "$dir/beta-sharded-{rank}.json" "$@"
launch --case gamma --output "$dir/gamma-{rank}.json" "$@"
echo
"$bin/compare_memory_reports" "$dir"
