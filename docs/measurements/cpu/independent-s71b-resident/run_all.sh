#!/bin/bash
# Records every job at its default batch for 3, 6, 12 steps, and at half and double batch for 6 steps.
# usage: bash run_all.sh [JOB...]   (from this directory)
export OMP_NUM_THREADS=1 PYTHONPATH=/tmp/s71b/python MEMDIAG_BIN=/tmp/s71b/bin
PY=~/.cache/memdiag/venv/bin/python
declare -A B=([prev-batch]=2048 [cache-self]=2048 [cache-self-hist]=2048 [hf-gpt2]=8 [hf-bert]=8 [accum4]=1024)
JOBS=${@:-clean dqn-prealloc dqn-lazy replay-deque4 replay-list dataset-before dataset-inside ema-before ema-step2 teacher-before teacher-inloop bank-buffer bank-attr prev-batch emb-cache accum4 hf-gpt2 hf-bert cache-self cache-self-hist two-opt two-opt-both}
for j in $JOBS; do
  b=${B[$j]:-256}
  for s in 3 6 12; do $PY jobs.py $j --steps $s --batch $b --out r/$j-b$b-s$s.json 2>>logs/record-stderr.txt; done
  for bb in $((b/2)) $((b*2)); do $PY jobs.py $j --steps 6 --batch $bb --out r/$j-b$bb-s6.json 2>>logs/record-stderr.txt; done
  /tmp/s71b/bin/compare_memory_reports r/$j-b*-s6.json > logs/$j-batch-sweep.txt
  for s in 3 6 12; do /tmp/s71b/bin/compare_memory_reports r/$j-b$b-s$s.json > logs/$j-b$b-s$s.txt; done
  /tmp/s71b/bin/compare_memory_reports r/$j-b$b-s*.json > logs/$j-steps-sweep.txt
  echo "done $j $(date -u +%T)"
done
