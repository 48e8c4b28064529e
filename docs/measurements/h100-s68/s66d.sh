#!/usr/bin/env bash
# Session 66, call 4 (what device time is left): one run's capacity on CUDA
# for ResNet-18 and ConvNeXt-tiny, P and the batch past 1.02 P in fresh
# processes under the default allocator.
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/ext
R=$OUT/r; mkdir -p $R
start=$(date +%s)
t() { echo "$1 $(( $(date +%s) - start )) s" >> $R/times.txt; }
finish() { cd $OUT && tar czf r.tgz r && rm -rf r; }
trap finish EXIT
nvidia-smi -L > $R/nvidia-smi.txt 2>&1
timeout 120 env CMAKE_PREFIX_PATH=$PWD/.bundle MEMDIAG_BUILD_TARGETS="compare_memory_reports" scripts/build.sh > $R/build.log 2>&1 || { t build-failed; tail -20 $R/build.log; exit 1; }
t build
timeout 100 python3 scripts/profile-capacity-check.py --device cuda --jobs resnet18,convnext --out $R/pcc > $R/pcc.txt 2>&1
t pcc
(cd $R && tar czf reports.tgz pcc && rm -rf pcc)
cat $R/times.txt; grep -v wrote $R/pcc.txt
