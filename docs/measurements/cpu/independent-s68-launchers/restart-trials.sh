#!/usr/bin/env bash
# Alternating torchrun --max-restarts 1 trials of jobs/j9_restart.py, with and without memdiag recording,
# to see whether attempt 1's Gloo init failure (connectFullMesh refused / hang) depends on recording.
cd "$(dirname "$0")"; V=~/.cache/memdiag/venv/bin
export OMP_NUM_THREADS=1 PYTHONPATH=/work/main/python MEMDIAG_BIN=/work/main/build/bin
mkdir -p r/restart-trials logs/restart-trials
for i in $(seq 1 ${1:-6}); do
  for mode in record norecord; do
    port=$((30100 + RANDOM % 800)); log=logs/restart-trials/$mode.$i.log
    if [ $mode = norecord ]; then export J9_NORECORD=1; else unset J9_NORECORD; fi
    timeout 150 $V/torchrun --nproc-per-node 2 --max-restarts 1 --rdzv-backend c10d --rdzv-endpoint localhost:$port \
      --rdzv-id trial-$mode-$i jobs/j9_restart.py "r/restart-trials/$mode-$i-a{restart}.json" trial > $log 2>&1
    rc=$?; ok=$(grep -c "done attempt 1" $log)
    echo "$mode $i rc=$rc attempt1_done=$ok meshfail=$(grep -c 'connectFullMesh failed' $log)"
  done
done
