# usage: cnt.sh job batch  -> appends json line to counts.jsonl
. /tmp/ind66/env.sh; cd /tmp/ind66
out=$($P jobs.py --job $1 --batch $2 --mode count 2>logs/cnt-$1-$2.err | tail -n 1)
echo "$out" >> counts.jsonl; echo "$out"
