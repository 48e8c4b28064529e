#!/bin/bash
# run.sh JOB MODE BATCH STEPS [extra args...]: records one job into r/JOB-MODE-bBATCH-sSTEPS[-variant].json
set -e
cd "$(dirname "$0")"
export OMP_NUM_THREADS=1 PYTHONPATH=/tmp/s71/python MEMDIAG_BIN=/tmp/s71/bin
PY=~/.cache/memdiag/venv/bin/python
job=$1 mode=$2 b=$3 s=$4; shift 4
out=r/$job-$mode-b$b-s$s.json
start=$(date +%s.%N)
$PY jobs.py $job --mode $mode --batch $b --steps $s -o $out "$@" 2> >(grep -v "Memory block of unknown size\|^\[W" >&2)
echo "$out $(echo "$(date +%s.%N) - $start" | bc) s" >&2
