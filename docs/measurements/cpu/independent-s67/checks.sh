#!/bin/sh
# The follow-up checks behind RESULTS.md's problems (run after run.sh).
set -u
cd "$(dirname "$0")"
export OMP_NUM_THREADS=1 PYTHONPATH=/work/main/python TORCH_EXTENSIONS_DIR=/tmp/ext MEMDIAG_BIN=/work/main/build/bin
P=${P:-$HOME/.cache/memdiag/venv/bin/python}
CMP=${CMP:-/work/main/build/bin/compare_memory_reports}
# projections under a 400 MiB budget, from the 6/12-step reports
for j in hook_pileup-6 hook_pileup-12 param_groups-12 grad_clones-12 create_graph-12 logger_dict-12 cache_fills3-6 curriculum-12 late_buffer-6; do
  $CMP r/$j.json --budget-mib 400 > logs/$j-budget400.txt 2>&1
done
$CMP r/hook_append-12.json --budget-mib 1024 > logs/hook_append-12-budget1024.txt 2>&1
# ground truth for the projections: run the leaks past 400 MiB
$P jobs.py --job hook_pileup --steps 30 -o r/check-hook_pileup-30.json > logs/check-hook_pileup-30.record.log 2>&1
$CMP r/check-hook_pileup-30.json --budget-mib 400 > logs/check-hook_pileup-30-budget400.txt 2>&1
$P jobs.py --job param_groups --steps 96 -o r/check-param_groups-96.json > logs/check-param_groups-96.record.log 2>&1
$CMP r/check-param_groups-96.json > logs/check-param_groups-96.txt 2>&1
$CMP r/check-param_groups-96.json --format json > logs/check-param_groups-96.json 2>&1
# does detach() help L3? the same loop keeping g.detach()
$P jobs.py --job create_graph_detached --steps 6 -o r/check-create_graph_detached-6.json > logs/check-create_graph_detached-6.record.log 2>&1
$CMP r/check-create_graph_detached-6.json > logs/check-create_graph_detached-6.txt 2>&1
# per-step cleanup MiB straight from the reports
python3 cleanups.py r/*.json > logs/cleanups.txt
