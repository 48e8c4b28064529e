#!/bin/bash
# all memdiag recordings: b, 2b, 4b per job (two streams in parallel)
cd "$(dirname "$0")"
( for j in "resnet50 4" "resnet50 8" "resnet50 16" "vit 2" "vit 4" "vit 8" "bert 2" "bert 4" "bert 8" "adamw_mlp 64" "adamw_mlp 128" "adamw_mlp 256"; do
    set -- $j; ./run.sh rec $1-b$2 $1 $2 3; done ) &
( for j in "mobilenet 8" "mobilenet 16" "mobilenet 32" "llama 2" "llama 4" "llama 8" "frozen 8" "frozen 16" "frozen 32" "accum 4" "accum 8" "accum 16"; do
    set -- $j; ./run.sh rec $1-b$2 $1 $2 3; done
  for b in 4 8 16; do ./run.sh rec gpt2var-b$b gpt2var $b 8; done ) &
wait
