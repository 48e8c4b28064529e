#!/bin/bash
# record one job (or all) and run the comparer: ./run.sh [JOB...]
set -u
cd "$(dirname "$0")"
export OMP_NUM_THREADS=1 PYTHONPATH=/work/main/python TORCH_EXTENSIONS_DIR=/tmp/ext MEMDIAG_BIN=/work/main/build/bin
P=~/.cache/memdiag/venv/bin/python
CMP=/work/main/build/bin/compare_memory_reports
declare -A B=( [llama_tokbudget]="400 800" [qwen2_lenrange]="250 500" [neox_curriculum]="300 600"
  [roberta_padlongest]="400 800" [effnet_multiscale]="800 1600" [vit_varbatch]="300 600"
  [t5_seq2seq]="400 800" [mistral_keeplogits]="300 600" )
JOBS=("$@"); [ ${#JOBS[@]} -eq 0 ] && JOBS=(llama_tokbudget qwen2_lenrange neox_curriculum roberta_padlongest effnet_multiscale vit_varbatch t5_seq2seq mistral_keeplogits)
for j in "${JOBS[@]}"; do
  timeout 120 $P jobs.py --job $j --steps 10 -o r/$j.json > logs/$j.record.log 2>&1
  echo "$j record rc=$?"
  $CMP r/$j.json > logs/$j.cmp.txt 2>&1
  $CMP r/$j.json --format json > logs/$j.cmp.json 2>logs/$j.cmp.json.err
  set -- ${B[$j]}
  $CMP r/$j.json --budget-mib $1 --budget-mib $2 > logs/$j.budget.txt 2>&1
  $CMP r/$j.json --budget-mib $1 --budget-mib $2 --format json > logs/$j.budget.json 2>&1
done
