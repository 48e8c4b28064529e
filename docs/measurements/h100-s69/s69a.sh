#!/usr/bin/env bash
# Build on the device from the bundle, then every gpu-labelled test.
set -uo pipefail
export NCCL_NVLS_ENABLE=0 OMP_NUM_THREADS=4
export PYTHONPATH=$PWD/python MEMDIAG_BIN=$PWD/build-gpu/bin TORCH_EXTENSIONS_DIR=/tmp/ext
mkdir -p $OUT/s69a
nvidia-smi --query-gpu=name,memory.total --format=csv > $OUT/s69a/gpu.txt 2>&1
t0=$(date +%s)
MEMDIAG_BUILD_DIR=$PWD/build-gpu CMAKE_PREFIX_PATH=$PWD/.bundle scripts/build.sh > $OUT/s69a/build.log 2>&1
echo "build rc=$? $(( $(date +%s) - t0 )) s" | tee -a $OUT/s69a/summary.txt
cd build-gpu
ctest -N -L gpu | tail -3 >> $OUT/s69a/summary.txt
timeout ${GPU_TEST_TIMEOUT:-430} ctest -L gpu --output-on-failure --timeout 300 ${CTEST_ARGS:-} > $OUT/s69a/ctest.log 2>&1
echo "ctest rc=$? $(( $(date +%s) - t0 )) s" | tee -a $OUT/s69a/summary.txt
tail -40 $OUT/s69a/ctest.log
cp Testing/Temporary/LastTest.log $OUT/s69a/ 2>/dev/null
cd $OUT && tar czf s69a.tgz s69a
