#!/bin/bash
# Capacity checks, round 2 (two-opt vs two-opt-both, dqn-lazy): record each job at the batch memdiag predicts for a budget and one more; 3 steps.
# The predictions come from: compare_memory_reports r/JOB-b*-s6.json --budget-mib N  (logs/capacity-predictions.txt)
export OMP_NUM_THREADS=1 PYTHONPATH=/tmp/s71b/python MEMDIAG_BIN=/tmp/s71b/bin
PY=~/.cache/memdiag/venv/bin/python
mkdir -p r/cap
while read j budget; do
  pred=$(/tmp/s71b/bin/compare_memory_reports r/$j-b*-s6.json --budget-mib $budget --format json | $PY -c '
import json,sys
d=json.load(sys.stdin)
for g in d["groups"]:
    for c in (g.get("capacity") or []):
        print(c.get("max_batch"))' | head -1)
  echo "$j budget $budget predicted $pred" >> logs/capacity-predictions.txt
  for b in $pred $((pred+1)); do
    $PY jobs.py $j --steps 3 --batch $b --out r/cap/$j-budget$budget-b$b-s3.json 2>>logs/record-stderr.txt
    $PY -c "
import json; r=json.load(open('r/cap/$j-budget$budget-b$b-s3.json'))
import sys
pk=max(s.get('peak_allocated_mib',0) for s in r['samples'])
print('$j budget $budget batch $b measured peak %.1f MiB -> %s' % (pk, 'fits' if pk<=$budget else 'OVER'))" >> logs/capacity-check.txt
  done
done <<'LIST'
two-opt 200
two-opt-both 200
dqn-lazy 520
LIST
