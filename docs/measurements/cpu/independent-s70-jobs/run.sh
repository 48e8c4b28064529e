#!/bin/bash
# ./run.sh TAG JOBARGS...  -> r/TAG.json, logs/TAG.rec.log, logs/TAG.txt, logs/TAG.json
# ./run.sh --cmp OUT FILES... [comparer options]  -> logs/OUT.txt (text) 
set -u
cd "$(dirname "$0")"
export OMP_NUM_THREADS=1 PYTHONPATH=/tmp/s70/python MEMDIAG_BIN=/tmp/s70/bin
PY=~/.cache/memdiag/venv/bin/python
CMP=/tmp/s70/bin/compare_memory_reports
if [ "$1" = "--cmp" ]; then
  out=$2; shift 2
  $CMP "$@" > logs/$out.txt 2>&1; echo "rc=$?" >> logs/$out.txt
  exit 0
fi
tag=$1; shift
/usr/bin/time -f "%e s wall, %M KiB maxrss" $PY jobs.py "$@" -o r/$tag.json > logs/$tag.rec.log 2>&1
echo "record rc=$?" >> logs/$tag.rec.log
$CMP r/$tag.json > logs/$tag.txt 2>&1; echo "rc=$?" >> logs/$tag.txt
$CMP r/$tag.json --format json > logs/$tag.json 2>/dev/null
tail -2 logs/$tag.rec.log
