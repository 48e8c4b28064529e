#!/bin/sh
# probes after the scan (s70): freeze-embeddings at few steps, where its loss difference stays under 0.01%
export OMP_NUM_THREADS=1 PYTHONPATH=/tmp/s70/python MEMDIAG_BIN=/tmp/s70/bin
PY=~/.cache/memdiag/venv/bin/python
cd "$(dirname "$0")"
one() {  # PAIR VARIANT BATCH STEPS
  f="logs/job-$1-b$3-s$4-$2"
  if [ -f "r/$1-b$3-s$4-$2.json" ]; then echo "skip $1 $2 b$3 s$4"; return; fi
  timeout 150 $PY jobs.py $1 $2 --batch $3 --steps $4 > "$f.out" 2> "$f.err"; echo "$1 $2 b$3 s$4 rc=$? $(date +%T)"; tail -c 300 "$f.out"
}
for v in base accumulate=4 sgd freeze-embeddings; do one B $v 4 3; done
for v in base accumulate=4 sgd freeze-embeddings; do one B $v 4 2; done
for v in base accumulate=4 sgd freeze-embeddings; do one B $v 16 2; done
