#!/usr/bin/env bash
# Session 68, one call (663 s of device time left): --find-max-batch against
# the Lightning-style binsearch on beta medium (37.5), then recording every
# step with and without the census at 2-3 ms steps (36.6), fewer repeats.
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/ext
R=$OUT/r; mkdir -p $R
start=$(date +%s)
t() { echo "$1 $(( $(date +%s) - start )) s" >> $R/times.txt; }
finish() { cd $OUT && tar czf r.tgz r && rm -rf r; }
trap finish EXIT
git rev-parse HEAD > $R/head.txt 2>&1
nvidia-smi > $R/nvidia-smi.txt 2>&1
timeout 150 env CMAKE_PREFIX_PATH=$PWD/.bundle MEMDIAG_BUILD_TARGETS="memory_diagnostics compare_memory_reports" scripts/build.sh > $R/build.log 2>&1 || { t build-failed; tail -20 $R/build.log; exit 1; }
t build
timeout 180 python3 scripts/bench-batch-search.py beta medium 3 2200 --device cuda --bin build/bin --repeat 3 > $R/search-vs-binsearch.txt 2>&1
echo "rc=$?" >> $R/search-vs-binsearch.txt
t bench
left=$(( 470 - ($(date +%s) - start) ))
[ $left -gt 60 ] && timeout $left python3 scripts/recorder-overhead-steady.py --device cuda --cases beta,gamma --preset small --block 200 --pairs 8 --shuffle 68 --modes 'recorded,no census' > $R/overhead-small.txt 2>&1
echo "rc=$?" >> $R/overhead-small.txt
t overhead
cat $R/times.txt; tail -14 $R/search-vs-binsearch.txt; tail -12 $R/overhead-small.txt
