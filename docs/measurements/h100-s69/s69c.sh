#!/usr/bin/env bash
# Session 69: --find-max-batch against the Lightning-style binsearch (37.5),
# whole command and search alone, beta then alpha.
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/ext
R=$OUT/s69c; mkdir -p $R
start=$(date +%s)
t() { echo "$1 $(( $(date +%s) - start )) s" >> $R/times.txt; }
finish() { cd $OUT && tar czf s69c.tgz s69c && rm -rf s69c; }
trap finish EXIT
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpu.txt 2>&1
B=build-gpu
timeout 170 env MEMDIAG_BUILD_DIR=$PWD/$B CMAKE_PREFIX_PATH=$PWD/.bundle MEMDIAG_BUILD_TARGETS="memory_diagnostics compare_memory_reports" scripts/build.sh > $R/build.log 2>&1 || { t build-failed; tail -20 $R/build.log; exit 1; }
t build
timeout 180 python3 scripts/bench-batch-search.py beta medium 3 2200 --device cuda --bin $B/bin --repeat 3 > $R/search-beta.txt 2>&1
echo "rc=$?" >> $R/search-beta.txt
t beta
cat $R/search-beta.txt
left=$(( 420 - ($(date +%s) - start) ))
[ $left -gt 60 ] && timeout $left python3 scripts/bench-batch-search.py alpha medium 3 5000 --device cuda --bin $B/bin --repeat 3 > $R/search-alpha.txt 2>&1
echo "rc=$?" >> $R/search-alpha.txt
t alpha
cat $R/search-alpha.txt $R/times.txt
