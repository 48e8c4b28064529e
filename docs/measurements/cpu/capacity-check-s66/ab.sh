#!/bin/bash
# The same report read with and without backward_profile.held_mib/operands_mib and forward_profile (the
# analysis falls back to growing every node's temporary, and the forward's whole peak, without them): jobs of capacity-check-s62, recorded afresh in a copy of
# that directory (./run.sh rec TAG JOB B 3 there). Truths are capacity-check-s62's and s63's counted ones.
cd /tmp/s66/c62 && C=/work/main/build/bin/compare_memory_reports
for spec in "resnet50-b8 1024 105" "vit-b4 1024 -" "mobilenet-b16 512 -" "bert-b4 2048 26" "llama-b4 1024 36" \
            "adamw_mlp-b64 320 3907" "frozen-b16 256 172"; do
  set -- $spec; f=r/$1.json
  python3 -c "
import json; r=json.load(open('$f')); bp=r['model']['backward_profile']; bp.pop('held_mib'); bp.pop('operands_mib'); r['model'].pop('forward_profile', None)
json.dump(r, open('/tmp/s66/old-$1.json','w'))"
  new=$($C $f --budget-mib $2 --format json | python3 -c "import json,sys; c=json.load(sys.stdin)['groups'][0]['capacity'][0]; b=c['binding']; print(c['max_batch'], b['phase'], b['piece'], (b.get('node') or {}).get('temporary_mib'))")
  old=$($C /tmp/s66/old-$1.json --budget-mib $2 --format json | python3 -c "import json,sys; c=json.load(sys.stdin)['groups'][0]['capacity'][0]; print(c['max_batch'])")
  echo "$1 budget $2 truth $3: without the fields $old, with $new"
done
