#!/bin/sh
# records every job (one process each), then compares each group
export OMP_NUM_THREADS=1 PYTHONPATH=/work/main/python
PY=~/.cache/memdiag/venv/bin/python
cd "$(dirname "$0")"
for j in "A base" "A checkpointing" "A autocast-bf16" "B base" "B accumulate=4" "C base" "C sgd" "C freeze-backbone" \
         "D base" "D fix-leak" "E base" "E fix-leak" "F base" "F set-to-none-false" "F empty-cache" "F checkpointing"; do
  set -- $j
  timeout 120 $PY jobs.py $1 $2 > "logs/job-$1-$2.out" 2> "logs/job-$1-$2.err"; echo "$1 $2 rc=$?"; tail -1 "logs/job-$1-$2.out"
done
