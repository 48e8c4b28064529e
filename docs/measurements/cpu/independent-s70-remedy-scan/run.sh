#!/bin/sh
# records every scan point (one process per job); usage: ./run.sh [PAIR...] (default A B C F)
export OMP_NUM_THREADS=1 PYTHONPATH=/tmp/s70/python MEMDIAG_BIN=/tmp/s70/bin
PY=~/.cache/memdiag/venv/bin/python
cd "$(dirname "$0")"
one() {  # PAIR VARIANT BATCH STEPS
  f="logs/job-$1-b$3-s$4-$2"
  if [ -f "r/$1-b$3-s$4-$2.json" ]; then echo "skip $1 $2 b$3 s$4"; return; fi
  timeout 150 $PY jobs.py $1 $2 --batch $3 --steps $4 > "$f.out" 2> "$f.err"; echo "$1 $2 b$3 s$4 rc=$? $(date +%T)"; tail -c 300 "$f.out"
}
pts() { # PAIR "VARIANTS" "BATCHES" ORIGBATCH
  for b in $3; do for v in base $2; do one $1 $v $b 6; done; done
  for s in 3 12; do for v in base $2; do one $1 $v $4 $s; done; done
}
for P in ${*:-A B C F}; do
  case $P in
    A) pts A "checkpointing autocast-bf16 sgd" "4 1 2 8" 4 ;;
    B) pts B "accumulate=4 sgd freeze-embeddings" "16 4 8 32" 16 ;;
    C) pts C "sgd freeze-backbone autocast-bf16" "16 4 8 32 64 128" 16 ;;
    F) pts F "checkpointing autocast-bf16 sgd accumulate=4" "32 4 8 16 64" 32 ;;
  esac
done
