#!/bin/bash
# run.sh TAG JOBARGS... : record one job into r/TAG.json, log in logs/TAG.rec.log
export OMP_NUM_THREADS=1 PYTHONPATH=/work/main/python:${EXTRA_PY:-} TORCH_EXTENSIONS_DIR=/tmp/ext
P=~/.cache/memdiag/venv/bin/python
tag=$1; shift
start=$(date +%s.%N)
$P jobs.py "$@" -o r/$tag.json > logs/$tag.rec.log 2>&1; rc=$?
echo "$tag rc=$rc $(echo "$(date +%s.%N) - $start" | bc) s"
