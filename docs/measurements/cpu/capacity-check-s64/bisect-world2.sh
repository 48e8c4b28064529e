#!/usr/bin/env bash
# bisect-world2.sh MODE LO HI (from the repository root, after scripts/build.sh): largest batch per rank at world 2 that completes under 100 MiB (own.json)
M=build/bin/memory_diagnostics; mode=$1; lo=$2; hi=$3
flag=""; case $mode in zero1) flag=--shard=optimizer;; zero2) flag=--shard=gradients;; zero3) flag=--shard=parameters;; esac
try() {
  port=$((20000 + RANDOM % 20000)); rcs=0
  for r in 0 1; do RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port $M --device cpu -q --dist-timeout-s 60 --case tests/cases/own.json --steps 2 --batch-size-per-device $1 --memory-limit-mib 100 $flag -o ${OUT:-/tmp}/$mode-$1-{rank}.json > /dev/null 2>&1 & done
  for j in $(jobs -p); do wait $j || rcs=1; done
  return $rcs
}
try $lo || { echo "$mode lo $lo fails"; exit; }
try $hi && { echo "$mode hi $hi fits"; exit; }
while [ $((hi - lo)) -gt 1 ]; do mid=$(( (lo + hi) / 2 )); if try $mid; then lo=$mid; else hi=$mid; fi; done
echo "$mode $lo fits, $hi does not"
