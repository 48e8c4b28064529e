#!/bin/bash
# The problems of RESULTS.md read again with the project's tree after its
# fixes (session 71): the comparer on the round's own reports where the
# recorder is not at issue, the jobs recorded again where it is.
# From this folder: ./after-s71.sh > after-s71.txt  (MEMDIAG_ROOT: the checkout, default ../../../..)
set -u
cd "$(dirname "$0")"
root=${MEMDIAG_ROOT:-$(cd ../../../.. && pwd)}
export OMP_NUM_THREADS=1 PYTHONPATH=$root/python MEMDIAG_BIN=$root/build/bin
PY=~/.cache/memdiag/venv/bin/python
C=$root/build/bin/compare_memory_reports
t=$(mktemp -d)
tar xf r.tar.xz -C "$t"
echo "# $(git -C "$root" rev-parse --short HEAD), $(date -u +%F)"
rec() { $PY jobs.py "$@" -o "$t/new.json" > /dev/null 2>&1; }
echo "## P1 ckpt raw-reentrant b16 s6 (recorded again)"
rec ckpt --mode raw-reentrant --batch 16 --steps 6; $C "$t/new.json" | grep -E "^dominant|weights take|^response"
echo "## P2 pad dynamic b8 s6, --budget-mib 400"
$C "$t/r/pad-dynamic-b8-s6.json" --budget-mib 400 | grep "^capacity" | grep -o "within a budget.*if none did)"
echo "## P3 gan gen b16+b64, --budget-mib 150 (not fixed)"
$C "$t/r/gan-gen-b16-s6.json" "$t/r/gan-gen-b64-s6.json" --budget-mib 150 | grep "^capacity" | cut -c1-160
echo "## P4 gan gen b64 s3 (recorded again)"
rec gan --mode gen --batch 64 --steps 3; $C "$t/new.json" | grep -cE "kept from step to step" | sed 's/^/kept lines: /'
echo "## P5 pad dynamic b2 s12"
$C "$t/r/pad-dynamic-b2-s12.json" | grep -E "^dominant"
echo "## P6 gan disc b64 s6 (recorded again)"
rec gan --mode disc --batch 64 --steps 6; $C "$t/new.json" | grep -E "^dominant"; python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print('steps', 1+max(s['step'] for s in r['samples'] if s['step'] is not None))" "$t/new.json"
echo "## P7 ema ema b32 s6 (recorded again)"
rec ema --mode ema --batch 32 --steps 6; $C "$t/new.json" | grep -E "alive at every cleanup" | cut -c1-300
echo "## P8 det b1+b2+b4: confirming runs"
$C "$t/r/det-clean-b1-s6.json" "$t/r/det-clean-b2-s6.json" "$t/r/det-clean-b4-s6.json" | grep -A3 "^to confirm" || echo "(no confirming runs asked)"
echo "## P11 mlpdtype bf16 against fp32"
$C "$t"/r/mlpdtype-*-b64-s6.json | grep -E "remedy keeps|measured best" | cut -c1-400
rm -rf "$t"
