#!/bin/bash
# second round: the counter at the recorded batches (against memdiag's own peaks), and the batches that bracket the budgets
cd "$(dirname "$0")"
( for b in 4 8 16 100 104 106 108; do ./run.sh cnt resnet50 $b 3; done
  ./run.sh cnt vit 69 3
  for b in 8 16 32 169 170; do ./run.sh cnt mobilenet $b 3; done
  for b in 2 4 8; do ./run.sh cnt llama $b 3; done
  for b in 2 4 8; do ./run.sh cnt bert $b 3; done ) &
( for l in 380 390 400 410; do ./run.sh cnt gpt2var 16 3 $l; done
  ./run.sh cnt gpt2var 32 3 200; ./run.sh cnt gpt2var 64 3 100
  for b in 4 8 16 56 60 64; do ./run.sh cnt accum $b 3; done
  for b in 64 256 3800 3900 4000; do ./run.sh cnt adamw_mlp $b 3; done
  for b in 8 16 32; do ./run.sh cnt frozen $b 3; done
  for b in 2 8; do ./run.sh cnt vit $b 3; done ) &
wait
