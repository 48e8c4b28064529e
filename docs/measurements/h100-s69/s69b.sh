#!/usr/bin/env bash
# Session 69: where --find-max-batch's 1.9 s go on beta medium (a timeline
# of its progress lines), then recording every step at 2-3 ms steps with
# and without the census, 15 pairs (36.6).
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1 TORCH_EXTENSIONS_DIR=/tmp/ext
R=$OUT/s69b; mkdir -p $R
start=$(date +%s)
t() { echo "$1 $(( $(date +%s) - start )) s" >> $R/times.txt; }
finish() { cd $OUT && tar czf s69b.tgz s69b; }
trap finish EXIT
nvidia-smi --query-gpu=name,memory.total --format=csv > $R/gpu.txt 2>&1
B=build-gpu
export PYTHONPATH=$PWD/python MEMDIAG_BIN=$PWD/$B/bin
timeout 150 env MEMDIAG_BUILD_DIR=$PWD/$B CMAKE_PREFIX_PATH=$PWD/.bundle scripts/build.sh > $R/build.log 2>&1 || { t build-failed; tail -20 $R/build.log; exit 1; }
t build
( cd $B && timeout 220 ctest -R OomScan.EpsilonOnCudaAgreesWithExpandableSegments --output-on-failure > $R/oomscan.log 2>&1; echo "oomscan rc=$?" >> $R/oomscan.log )
tail -5 $R/oomscan.log
t oomscan
for i in 1 2 3; do
  python3 - $B/bin/memory_diagnostics --case beta --preset medium --steps 3 --device cuda --find-max-batch --memory-limit-mib 2200 -o $R/max-$i.json > $R/timeline-$i.txt 2>&1 <<'PY'
import subprocess, sys, time
t0 = time.perf_counter()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
for line in p.stdout:
    print(f"{time.perf_counter() - t0:7.3f} {line}", end="")
print(f"{time.perf_counter() - t0:7.3f} exit {p.wait()}")
PY
done
t timeline
cat $R/timeline-2.txt
left=$(( 560 - ($(date +%s) - start) ))
timeout $left python3 scripts/recorder-overhead-steady.py --device cuda --cases beta,gamma --preset small --block 200 --pairs 12 --shuffle 69 --modes 'recorded,no census' > $R/overhead-small.txt 2>&1
echo "rc=$?" >> $R/overhead-small.txt
t overhead
cat $R/times.txt; tail -14 $R/overhead-small.txt
