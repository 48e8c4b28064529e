#!/usr/bin/env bash
# Session 70, call 1: build on the device, then every gpu-labelled test but
# DocCommands.RunAsWrittenOnCuda (1200 s alone): session 69's analysis on CUDA.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMP_NUM_THREADS=4 PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD/python MEMDIAG_BIN=$PWD/build-gpu/bin TORCH_EXTENSIONS_DIR=/tmp/ext
R=$OUT/s70a; mkdir -p $R
finish() { cp build-gpu/Testing/Temporary/LastTest.log $R/ 2>/dev/null; cd $OUT && tar czf s70a.tgz s70a && rm -rf s70a; }
trap finish EXIT
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpu.txt 2>&1; cat $R/gpu.txt
t0=$(date +%s)
MEMDIAG_BUILD_DIR=$PWD/build-gpu CMAKE_PREFIX_PATH=$PWD/.bundle scripts/build.sh > $R/build.log 2>&1
echo "build rc=$? $(( $(date +%s) - t0 )) s" | tee -a $R/summary.txt
cd build-gpu
ctest -N -L gpu | tail -2 >> $R/summary.txt
left=$(( ${BUDGET:-570} - ($(date +%s) - t0) ))
timeout $left ctest -L gpu -E 'DocCommands.RunAsWrittenOnCuda' -j2 --output-on-failure --timeout 400 > $R/ctest.log 2>&1
echo "ctest rc=$? $(( $(date +%s) - t0 )) s" | tee -a $R/summary.txt
grep -E "Passed|Failed|Skipped|Not Run|tests passed|Timeout|\*\*\*" $R/ctest.log | tail -45
