#!/bin/sh
# Records each job at 6 and 12 steps, one at a time, then runs the comparer on each report
# alone (text and json) and on each job's pair.  Usage: sh run.sh [JOB...]
set -u
cd "$(dirname "$0")"
export OMP_NUM_THREADS=1 PYTHONPATH=/work/main/python TORCH_EXTENSIONS_DIR=/tmp/ext MEMDIAG_BIN=/work/main/build/bin
P=${P:-$HOME/.cache/memdiag/venv/bin/python}
CMP=${CMP:-/work/main/build/bin/compare_memory_reports}
JOBS=${*:-"hook_append hook_pileup create_graph param_groups grad_clones logger_dict late_buffer cache_fills3 curriculum unfreeze3"}
for j in $JOBS; do
  for n in 6 12; do
    s=$(date +%s.%N)
    $P jobs.py --job $j --steps $n -o r/$j-$n.json > logs/$j-$n.record.log 2>&1; rc=$?
    e=$(date +%s.%N)
    echo "$j $n steps: rc=$rc $(echo "$e - $s" | bc) s" | tee -a logs/timings.txt
    $CMP r/$j-$n.json > logs/$j-$n.txt 2>&1
    $CMP r/$j-$n.json --format json > logs/$j-$n.json 2>logs/$j-$n.json.err
  done
  $CMP r/$j-6.json r/$j-12.json > logs/$j-pair.txt 2>&1
done
