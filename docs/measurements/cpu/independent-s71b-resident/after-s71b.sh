#!/bin/bash
# The problems of RESULTS.md read again with the project's tree after its
# fixes (session 71): the comparer on the round's reports, and the jobs
# whose recorder was at fault recorded again.
# From this folder: ./after-s71b.sh > after-s71b.txt  (MEMDIAG_ROOT: the checkout, default ../../../..)
set -u
cd "$(dirname "$0")"
root=${MEMDIAG_ROOT:-$(cd ../../../.. && pwd)}
export OMP_NUM_THREADS=1 PYTHONPATH=$root/python MEMDIAG_BIN=$root/build/bin
PY=~/.cache/memdiag/venv/bin/python
C=$root/build/bin/compare_memory_reports
t=$(mktemp -d)
tar xJf r.tar.xz -C "$t"
echo "# $(git -C "$root" rev-parse --short HEAD), $(date -u +%F)"
echo "## P1 bank-buffer b256 s6"
$C "$t/r/bank-buffer-b256-s6.json" | grep -E "^dominant|held at every step|^response" | cut -c1-330
echo "## P2 two-opt b128/b256/b512 s6 recorded again, --budget-mib 200"
for b in 128 256 512; do $PY jobs.py two-opt --batch $b --steps 6 --out "$t/t$b.json" > /dev/null 2>&1; done
$C "$t/t256.json" | grep -E "^dominant|forward adds|buffer it fills" | cut -c1-200
$C "$t/t128.json" "$t/t256.json" "$t/t512.json" --budget-mib 200 | grep "^capacity" | cut -c1-160
echo "## P3 dominant cause beside resident memory (not changed: the response leads with it)"
$C "$t/r/dqn-prealloc-b256-s6.json" | grep -E "^dominant|^response" | cut -c1-200
echo "## P4 dqn-prealloc, --budget-mib 300"
$C "$t"/r/dqn-prealloc-b*-s6.json --budget-mib 300 | grep "^capacity" | cut -c1-330
echo "## P5 replay-deque4 b256 s3 (not changed)"
$C "$t/r/replay-deque4-b256-s3.json" | grep -E "^dominant" | cut -c1-200
echo "## P6 replay-list b256 s6: the response"
$C "$t/r/replay-list-b256-s6.json" | grep -E "^response" | cut -c1-400
echo "## P6 dqn-prealloc: the resident records in the JSON"
$C "$t/r/dqn-prealloc-b256-s6.json" --format json | python3 -c "
import json,sys; g=json.load(sys.stdin)['groups'][0]
for e in g['evidence_data']:
    if e['code']=='resident_tensors': print([(t['shape'], t['count'], round(t['mib'],2), t['made_by']) for t in e['tensors']])"
rm -rf "$t"
