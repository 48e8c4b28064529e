#!/usr/bin/env bash
# GPU call 12 (session 48, not run: no device time left): library jobs recorded at 4 and 12 steps; an OOM refereed by expandable segments.
set -u
if [ "${1:-}" != inner ]; then timeout 165 bash "$0" inner; echo "inner rc=$?"; cd $OUT && tar czf s.tgz s && rm -rf s; exit 0; fi
export NCCL_NVLS_ENABLE=0
mkdir -p $OUT/s; S=$OUT/s; t0=$(date +%s)
J=python/jobs/corpus.py
for j in bert-kept-logits; do for n in 4 12; do
  timeout 60 python3 $J run $j --size gpu --steps $n -o $S/$j-$n.json > $S/$j-$n.log 2>&1; echo "$j $n rc=$? at $(( $(date +%s) - t0 )) s"
done; done
timeout 60 python3 $J run resnet-big-batch --size gpu -o $S/resnet-big-batch.json > $S/resnet-big-batch.log 2>&1; echo "big rc=$? at $(( $(date +%s) - t0 )) s"
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True timeout 60 python3 $J run resnet-big-batch --size gpu -o $S/resnet-big-batch-es.json > $S/resnet-big-batch-es.log 2>&1; echo "big es rc=$? at $(( $(date +%s) - t0 )) s"
for j in gpt2-dyn-random resnet-wide-head; do for n in 4 12; do
  timeout 60 python3 $J run $j --size gpu --steps $n -o $S/$j-$n.json > $S/$j-$n.log 2>&1; echo "$j $n rc=$? at $(( $(date +%s) - t0 )) s"
done; done
