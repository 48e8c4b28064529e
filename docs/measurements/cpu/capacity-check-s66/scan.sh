cd /work/main/docs/measurements/cpu/independent-s65 && export OMP_NUM_THREADS=1 PYTHONPATH=/work/main/python TORCH_EXTENSIONS_DIR=/tmp/ext
P=~/.cache/memdiag/venv/bin/python; CMP=/work/main/build/bin/compare_memory_reports; mkdir -p /tmp/s66/scan
for spec in "2 3" "4 3" "8 3" "16 3" "4 2" "4 4" "4 6"; do set -- $spec
  f=/tmp/s66/scan/convnext-b$1-s$2.json
  $P jobs.py --job convnext --batch $1 --steps $2 --mode record -o $f > /dev/null 2>&1
  echo "convnext batch $1 steps $2: $($CMP $f --budget-mib 700 | grep -E '^dominant cause' | cut -c1-60) | $($CMP $f --budget-mib 700 --format json | python3 -c "import json,sys; c=json.load(sys.stdin)['groups'][0]['capacity'][0]; print('P', c['max_batch'])")"
done
cd ../capacity-check-s62
for spec in "2 3" "4 3" "8 3" "16 3" "4 2" "4 4" "4 6"; do set -- $spec
  f=/tmp/s66/scan/resnet50-b$1-s$2.json
  $P jobs.py --job resnet50 --batch $1 --steps $2 --seq 0 --mode record -o $f > /dev/null 2>&1
  echo "resnet50 batch $1 steps $2: $($CMP $f --budget-mib 1024 | grep -E '^dominant cause' | cut -c1-60) | $($CMP $f --budget-mib 1024 --format json | python3 -c "import json,sys; c=json.load(sys.stdin)['groups'][0]['capacity'][0]; print('P', c['max_batch'])")"
done
