#!/bin/bash
# Session 67, after the fixes: the comparer of HEAD on this folder's reports (the verdicts' lines that
# changed), and the jobs whose fix is in the recorder recorded again into /tmp/s67-after.
# ./after.sh > after.txt   (from this folder; OMP_NUM_THREADS=1, the venv's python)
cd "$(dirname "$0")"
export OMP_NUM_THREADS=1 PYTHONPATH=/work/main/python TORCH_EXTENSIONS_DIR=/tmp/ext MEMDIAG_BIN=/work/main/build/bin
P=~/.cache/memdiag/venv/bin/python
CMP=/work/main/build/bin/compare_memory_reports
mkdir -p /tmp/s67-after
echo "# memdiag $(git -C /work/main rev-parse --short HEAD)"
show() { grep -E "^dominant|grows|rose|kept from|^response|graph outlives|outside any graph|new parameters|faster|not a leak|Fixing graph" | cut -c1-400; }
for r in hook_append-6 hook_pileup-6 hook_pileup-12 create_graph-6 grad_clones-6 logger_dict-6 late_buffer-6 cache_fills3-6 curriculum-12 unfreeze3-6; do
  echo "== $r (report as recorded at 07401e5; --budget-mib 400)"
  $CMP r/$r.json --budget-mib 400 | show
done
for j in param_groups grad_clones; do
  $P jobs.py --job $j --steps 6 -o /tmp/s67-after/$j-6.json > /dev/null 2>&1
  echo "== $j, 6 steps, recorded again at HEAD (--budget-mib 400)"
  $CMP /tmp/s67-after/$j-6.json --budget-mib 400 | show
done
