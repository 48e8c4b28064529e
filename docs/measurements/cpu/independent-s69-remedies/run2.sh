#!/bin/sh
# second round: consistency probes (labels, would-not-help lines, bf16 tolerance)
export OMP_NUM_THREADS=1 PYTHONPATH=/work/main/python
PY=~/.cache/memdiag/venv/bin/python
cd "$(dirname "$0")"
for j in "F autocast-bf16" "F sgd" "F split=2" "F remat" "B microbatch"; do
  set -- $j
  timeout 120 $PY jobs.py $1 $2 > "logs/job-$1-$2.out" 2> "logs/job-$1-$2.err"; echo "$1 $2 rc=$?"; tail -1 "logs/job-$1-$2.out"
done
