#!/bin/bash
# Reproduces every report and log here (about 3 minutes on 2 CPU cores).
set -u
cd "$(dirname "$0")"
export OMP_NUM_THREADS=1 PYTHONPATH=/work/main/python
P=~/.cache/memdiag/venv/bin/python
C=/work/main/build/bin/compare_memory_reports
for j in resnet18 bert llama; do $P jobs/train.py $j main main/$j.json > logs/record-main-$j.log 2>&1; done
rec(){ mkdir -p pr/$1; $P jobs/train.py $2 $3 pr/$1/$2.json > logs/record-$1.log 2>&1; }
rec adamw resnet18 adamw; rec batch32 resnet18 batch32; rec refactor resnet18 refactor
rec wider bert wider; rec leak-bert bert leak; rec evalgrad bert evalgrad; rec steps8 bert steps8
rec ckpt llama ckpt; rec bf16 llama bf16; rec seq512 llama seq512; rec leak-llama llama leak
for j in resnet18 bert llama; do for n in 1 2 3; do rec noise-$j-$n $j main; done; done
# a CI run records every job: the two jobs a PR does not touch are the noise-1 recordings
for c in adamw batch32 refactor; do cp pr/noise-bert-1/bert.json pr/noise-llama-1/llama.json pr/$c/; done
for c in wider leak-bert evalgrad steps8; do cp pr/noise-resnet18-1/resnet18.json pr/noise-llama-1/llama.json pr/$c/; done
for c in ckpt bf16 seq512 leak-llama; do cp pr/noise-resnet18-1/resnet18.json pr/noise-bert-1/bert.json pr/$c/; done
for n in 1 2 3; do mkdir -p pr/noise-all-$n; cp pr/noise-resnet18-$n/resnet18.json pr/noise-bert-$n/bert.json pr/noise-llama-$n/llama.json pr/noise-all-$n/; done
EXP="--expect resnet18=activations --expect bert=optimizer_state --expect llama=activations"
for c in adamw batch32 refactor wider leak-bert leak-llama evalgrad steps8 ckpt bf16 seq512 noise-all-1 noise-all-2 noise-all-3; do
  $C pr/$c/ --baseline main/ > logs/gate-$c.txt 2>&1; echo "$c gate exit $?"
  $C pr/$c/ --baseline main/ --format json -o logs/gate-$c.json
  $C pr/$c/ --baseline main/ --format junit -o logs/junit-$c.xml > logs/junit-$c.stdout 2>&1
  $C pr/$c/ --baseline main/ $EXP --fail-on retained_graph > logs/gate-full-$c.txt 2>&1; echo "$c full exit $?"
done
