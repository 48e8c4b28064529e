#!/bin/sh
# compares each scan point (baseline + its remedies) in text and JSON; then each pair's whole batch scan
export OMP_NUM_THREADS=1 PYTHONPATH=/tmp/s70/python MEMDIAG_BIN=/tmp/s70/bin
C=/tmp/s70/bin/compare_memory_reports
cd "$(dirname "$0")"
for base in r/*-base.json; do
  pt=$(basename "$base" -base.json)          # e.g. F-b32-s6
  $C r/$pt-*.json > logs/cmp-$pt.txt 2>&1
  $C --format json r/$pt-*.json > logs/cmp-$pt.json 2> logs/cmp-$pt.json.err
done
for P in A B C F; do   # all batches at 6 steps together (sweep), and all steps at the original batch
  ls r/$P-b*-s6-*.json >/dev/null 2>&1 || continue
  $C r/$P-b*-s6-*.json > logs/cmp-$P-allbatches.txt 2>&1
  $C --format json r/$P-b*-s6-*.json > logs/cmp-$P-allbatches.json 2>/dev/null
done
