#!/bin/bash
# ./run.sh rec TAG JOB BATCH [STEPS] [SEQ]   memdiag.record -> r/TAG.json (log logs/TAG.rec.log)
# ./run.sh cnt JOB BATCH [STEPS] [SEQ]       counting allocator -> a JSON line appended to logs/count.jsonl
cd "$(dirname "$0")"
export OMP_NUM_THREADS=1 PYTHONPATH=/work/main/python TORCH_EXTENSIONS_DIR=/tmp/ext MEMDIAG_BIN=/work/main/build/bin
P=~/.cache/memdiag/venv/bin/python
mode=$1; shift
if [ "$mode" = rec ]; then
  tag=$1 job=$2 b=$3 st=${4:-3} seq=${5:-0}
  $P jobs.py --job $job --batch $b --steps $st --seq $seq --mode record -o r/$tag.json > logs/$tag.rec.log 2>&1; echo "rec $tag rc=$?"
else
  job=$1 b=$2 st=${3:-3} seq=${4:-0}
  $P jobs.py --job $job --batch $b --steps $st --seq $seq --mode count 2>>logs/count.err | tee -a logs/count.jsonl
fi
