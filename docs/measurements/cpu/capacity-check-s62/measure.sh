#!/bin/bash
# truth runs (no memdiag, counting allocator), around each prediction; lines appended to logs/count.jsonl
cd "$(dirname "$0")"
( for b in 66 68 69 70 72 85; do ./run.sh cnt resnet50 $b 3; done
  for b in 68 70 72; do ./run.sh cnt vit $b 3; done
  for b in 4412 4502 4592; do ./run.sh cnt adamw_mlp $b 3; done ) &
( for b in 150 161 162 165 168; do ./run.sh cnt mobilenet $b 3; done
  for b in 25 26 27; do ./run.sh cnt bert $b 3; done
  for b in 35 36 37; do ./run.sh cnt llama $b 3; done
  for b in 159 168 172 176; do ./run.sh cnt frozen $b 3; done
  for b in 68 72 76; do ./run.sh cnt accum $b 3; done
  for l in 432 441 450 454; do ./run.sh cnt gpt2var 16 3 $l; done
  ./run.sh cnt gpt2var 32 3 220; ./run.sh cnt gpt2var 24 3 294 ) &
wait
