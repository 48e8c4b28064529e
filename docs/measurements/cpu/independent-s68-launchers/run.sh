#!/usr/bin/env bash
# Runs the launcher jobs one by one (or those named: ./run.sh j3 j7), then the comparer on each.
# From this folder. Reports in r/, logs in logs/.
set -u
cd "$(dirname "$0")"
V=~/.cache/memdiag/venv/bin
export OMP_NUM_THREADS=1 PYTHONPATH=/work/main/python MEMDIAG_BIN=/work/main/build/bin TORCH_EXTENSIONS_DIR=/tmp/ext
export TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1
CMP=/work/main/build/bin/compare_memory_reports
TR="$V/torchrun"
B=512

timed() { local name=$1; shift; local t0=$(date +%s.%N); "$@" > logs/$name.log 2>&1; local rc=$?
  echo "rc=$rc wall=$(echo "$(date +%s.%N) - $t0" | bc)s" >> logs/$name.log; echo "$name rc=$rc"; }
compare() { local name=$1; shift
  $CMP "$@" --budget-mib $B > logs/$name.compare.txt 2>&1; echo "rc=$?" >> logs/$name.compare.txt
  $CMP "$@" --budget-mib $B --format json > logs/$name.compare.json 2> logs/$name.compare.json.stderr; }

j1() { timed j1 env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT $V/python jobs/j1_spawn_tcp.py
       ls r/ | grep '^j1' >> logs/j1.log; compare j1 r/j1*.json; }
j2() { timed j2 $V/accelerate launch --multi_gpu --num_processes 2 --num_machines 1 --mixed_precision no \
         --dynamo_backend no --main_process_port 29521 jobs/j2_accelerate.py; compare j2 r/j2-*.json; }
j3() { (  $TR --nnodes 2 --node-rank 0 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint localhost:29530 \
              --rdzv-id s68j3 jobs/j3_resnet_ddp.py > logs/j3.node0.log 2>&1 &
          $TR --nnodes 2 --node-rank 1 --nproc-per-node 1 --rdzv-backend c10d --rdzv-endpoint localhost:29530 \
              --rdzv-id s68j3 jobs/j3_resnet_ddp.py > logs/j3.node1.log 2>&1 &
          wait ); ls r/ | grep '^j3' > logs/j3.files.txt; compare j3 r/j3*.json; }
j4() { timed j4 $TR --nproc-per-node 2 --master-port 29540 jobs/j4_trainer.py; compare j4 r/j4*.json; }
j5() { timed j5 $TR --nproc-per-node 2 --master-port 29550 jobs/j5_uneven.py; compare j5 r/j5-rank*.json; }
j6() { timed j6 $TR --nproc-per-node 2 --master-port 29560 jobs/j6_nosync.py; compare j6 r/j6-*.json; }
j7() { timed j7 $TR --nproc-per-node 2 --master-port 29570 jobs/j7_leak_rank1.py; compare j7 r/j7*.json; }
j8() { timed j8 $TR --nproc-per-node 2 --master-port 29580 jobs/j8_fsdp2.py; compare j8 r/j8*.json; }
j9a() { timed j9a timeout 240 $TR --nproc-per-node 2 --max-restarts 1 --rdzv-backend c10d --rdzv-endpoint localhost:$((29800 + RANDOM % 100)) \
         --rdzv-id s68j9a jobs/j9_restart.py r/j9a.json j9a-restart
       ls -la r/ | grep 'j9a' >> logs/j9a.log; compare j9a r/j9a*.json; }
j9b() { timed j9b timeout 240 $TR --nproc-per-node 2 --max-restarts 1 --rdzv-backend c10d --rdzv-endpoint localhost:29591 \
         --rdzv-id s68j9b jobs/j9_restart.py 'r/j9b-a{restart}.json' j9b-restart
       ls -la r/ | grep 'j9b' >> logs/j9b.log; compare j9b r/j9b*.json; }
j9c() { timed j9c timeout 240 $TR --nproc-per-node 2 --max-restarts 1 --rdzv-backend c10d --rdzv-endpoint localhost:$((29900 + RANDOM % 100)) \
         --rdzv-id s68j9c jobs/j9_restart.py 'r/j9c-a{restart}.json' j9c-restart 6
       ls -la r/ | grep 'j9c' >> logs/j9c.log; compare j9c r/j9c*.json; }
j9() { j9a; j9b; j9c; }
j10() { timed j10 $TR --nproc-per-node 2 --master-port 29600 jobs/j10_two_recordings.py; compare j10 r/j10*.json; }
j11() { timed j11 env -u RANK -u WORLD_SIZE $V/python jobs/j11_spawn_zero.py; compare j11 r/j11*.json; }
j12() { timed j12a $TR --nproc-per-node 1 --master-port 29620 jobs/j12a_world1.py
        ls r/ | grep 'j12a' >> logs/j12a.log; compare j12a r/j12a*.json
        $CMP r/j12a*.json --budget-mib $B --world-size 2 > logs/j12a.worldsize2.txt 2>&1
        timed j12b $V/python jobs/j12b_outdir.py r/j12b-dir/
        timed j12b-noslash $V/python jobs/j12b_outdir.py r/j12b-dir; }

# J13: the capacity lines re-measured: each job at the batch its line predicted for 512 MiB and at a larger one
j13() { mkdir -p r/j13
  for b in 106 1024; do timed j13-j1-b$b env -u RANK -u WORLD_SIZE J1_B=$b J1_OUT=r/j13/j1-b$b.json $V/python jobs/j1_spawn_tcp.py; done
  for b in 161 200; do timed j13-j3-b$b env J3_B=$b J3_OUT=r/j13/j3-b$b.json $TR --nproc-per-node 2 --master-port 2963$((b % 10)) jobs/j3_resnet_ddp.py; done
  for b in 26 30; do timed j13-j5-b$b env J5_B0=$b J5_OUT=r/j13/j5-b$b.json $TR --nproc-per-node 2 --master-port 2964$((b % 10)) jobs/j5_uneven.py; done
  for b in 59 1024; do timed j13-j8-b$b env J8_B=$b J8_OUT=r/j13/j8-b$b.json $TR --nproc-per-node 2 --master-port 2965$((b % 10)) jobs/j8_fsdp2.py; done
  for b in 49 1024; do timed j13-j11-b$b env -u RANK -u WORLD_SIZE J11_B=$b J11_OUT="r/j13/j11-b$b-{rank}.json" $V/python jobs/j11_spawn_zero.py; done
  for f in r/j13/*.json; do echo "$f $(python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['config']['batch_size_per_device'], r['status'], round(max(s.get('peak_allocated_mib') or s['allocated_mib'] for s in r['samples']),1))" $f)"; done > logs/j13.peaks.txt; }

jobs=("$@"); [ ${#jobs[@]} -eq 0 ] && jobs=(j1 j2 j3 j4 j5 j6 j7 j8 j9 j10 j11 j12)
for j in "${jobs[@]}"; do $j; done
