#!/bin/bash
# run.sh TAG JOBARGS... : record one job into r/TAG.json (recorder log in logs/TAG.rec.log),
# then the comparer's text on that one report into logs/TAG.txt
export OMP_NUM_THREADS=1 PYTHONPATH=/work/main/python TORCH_EXTENSIONS_DIR=/tmp/ext MEMDIAG_BIN=/work/main/build/bin
P=~/.cache/memdiag/venv/bin/python
C=/work/main/build/bin/compare_memory_reports
tag=$1; shift
start=$(date +%s.%N)
$P jobs.py "$@" -o r/$tag.json > logs/$tag.rec.log 2>&1; rc=$?
echo "$tag rc=$rc $(echo "$(date +%s.%N) - $start" | bc) s"
[ -f r/$tag.json ] && $C r/$tag.json > logs/$tag.txt 2>&1
exit 0
