#!/bin/bash
# Session 66: each job of capacity-check-s65-independent (and independent-s65's ConvNeXt) recorded afresh
# at its batch, then compare_memory_reports --budget-mib N: P, the range's low and high end, the binding
# node and its fixed workspace (temporary_mib). Truths (T) are the counted ones of those directories.
cd /work/main/docs/measurements/cpu/capacity-check-s65-independent && . ./env.sh
while read job b n t; do
  f=/tmp/s66/cap/$job-b$b.json
  [ -f $f ] || $P jobs.py --job $job --batch $b --steps 3 --mode record -o $f > /dev/null 2>&1
  p=$($CMP $f --budget-mib $n --format json | python3 -c "import json,sys; d=json.load(sys.stdin); c=d['groups'][0]['capacity'][0]; cv=c['caveats']; b=c['binding']; print(c['max_batch'], cv.get('batch_if_all_grows'), cv.get('batch_if_activations_grow'), (b.get('node') or {}).get('index'), (b.get('node') or {}).get('temporary_mib'))")
  echo "$job b$b N$n truth $t -> $p"
done <<LIST
swin 4 768 30
swin 4 1024 48
regnet 4 140 34
regnet 4 256 78
unet 4 400 29
unet 4 700 53
mixer 8 420 59
audio 8 360 53
audio 8 720 108
deberta 4 576 30
deberta 4 384 19
audio 16 360 53
audio 16 720 108
regnet 8 140 34
regnet 8 256 78
LIST
# ConvNeXt-tiny (independent-s65's job; truth 35: 695.2 MiB, 36: 703.4)
cd ../independent-s65
for b in 4 8; do
  f=/tmp/s66/cap/convnext-b$b.json
  [ -f $f ] || $P jobs.py --job convnext --batch $b --steps 3 --mode record -o $f > /dev/null 2>&1
  echo "convnext b$b N700 truth 35 -> $($CMP $f --budget-mib 700 | grep ^capacity)"
done
