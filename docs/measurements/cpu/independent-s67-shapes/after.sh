#!/bin/bash
# Session 67, after the fixes: the comparer of HEAD on this folder's reports, and the T5 job (whose
# fix is in the recorder: its target tokens) recorded again into /tmp/s67-after.
# ./after.sh > after.txt   (from this folder; OMP_NUM_THREADS=1, the venv's python)
cd "$(dirname "$0")"
export OMP_NUM_THREADS=1 PYTHONPATH=/work/main/python TORCH_EXTENSIONS_DIR=/tmp/ext MEMDIAG_BIN=/work/main/build/bin
P=~/.cache/memdiag/venv/bin/python
CMP=/work/main/build/bin/compare_memory_reports
mkdir -p /tmp/s67-after
echo "# memdiag $(git -C /work/main rev-parse --short HEAD)"
for spec in "t5_seq2seq 300" "mistral_keeplogits 300" "neox_curriculum 300"; do
  set -- $spec
  echo "== $1 (report as recorded at 24fa069; --budget-mib $2)"
  $CMP r/$1.json --budget-mib $2 | grep -E "^capacity|post-cleanup" | cut -c1-1200
done
$P jobs.py --job t5_seq2seq --steps 10 -o /tmp/s67-after/t5_seq2seq.json > /dev/null 2>&1
for b in 300 400; do
  echo "== t5_seq2seq recorded again at HEAD (--budget-mib $b)"
  $CMP /tmp/s67-after/t5_seq2seq.json --budget-mib $b | grep -E "^capacity" | cut -c1-1200
done
