#!/usr/bin/env bash
# A model whose whole weights exceed the device, sharded: the tests' own
# 48-layer MLP (tests/cases/too-large.json, 48.13 MiB of weights) at a 36
# MiB limit per rank over four ranks (torchrun, Gloo on the CPU). Prints the
# what-if from a single-rank run (compare_memory_reports --budget-mib 36
# --world-size 4), then the real runs: ZeRO-3 at the predicted batch and
# around it, and a replicated rank at batch 1.
#
#   scripts/sharding-too-large.sh DIR   (the reports land in DIR)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
dir="${1:?usage: scripts/sharding-too-large.sh DIR}"
launcher_setup
case_file="$MEMDIAG_ROOT/tests/cases/too-large.json"
mkdir -p "$dir"
"$bin/memory_diagnostics" --device cpu -q --case "$case_file" --steps 2 -o "$dir/one.json" --overwrite
echo "\$ compare_memory_reports one.json --budget-mib 36 --world-size 4   # a single-rank run of tests/cases/too-large.json"
"$bin/compare_memory_reports" "$dir/one.json" --budget-mib 36 --world-size 4 | grep -E "^capacity: the whole|^  (mode|ddp|zero)"
predicted="$("$bin/compare_memory_reports" "$dir/one.json" --budget-mib 36 --world-size 4 --format json |
  python3 -c 'import json,sys; print([c["max_batch"] for c in json.load(sys.stdin)["groups"][0]["sharded_capacity"] if c["mode"]=="zero3"][0])')"
echo "\$ torchrun --nproc-per-node=4 memory_diagnostics --case tests/cases/too-large.json --memory-limit-mib 36 --steps 2 ..."
for run in "parameters $((predicted * 97 / 100))" "parameters $((predicted - 3))" "parameters $((predicted - 2))" \
           "parameters $predicted" "none 1"; do
  set -- $run
  shard=(); [ "$1" = none ] || shard=(--shard="$1")
  rc=0
  OMP_NUM_THREADS=1 "$runner" --nproc-per-node=4 --no-python "$bin/memory_diagnostics" --device cpu -q --dist-timeout-s 60 \
    --case "$case_file" --steps 2 --batch-size-per-device "$2" --memory-limit-mib 36 "${shard[@]}" \
    -o "$dir/$1-b$2-{rank}.json" --overwrite >/dev/null 2>&1 || rc=$?
  python3 - "$dir/$1-b$2-0.json" "$1" "$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
mode = r["config"]["parallelism"]["mode"]
oom = [e for e in r["events"] if e["kind"] == "oom"]
peak = max((s["peak_allocated_mib"] for s in r["samples"]), default=None)
ready = [s["peak_allocated_mib"] for s in r["samples"] if s["phase"] == "model_ready"]
what = f"out of memory in {oom[0]['phase']}" if oom else f"complete, peak {peak:.2f} MiB (model_ready {ready[0]:.2f})"
print(f"  {mode:5s} batch {sys.argv[3]:>4s} per rank: rank 0 {what}")
PY
done
