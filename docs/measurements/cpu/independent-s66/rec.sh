. /tmp/ind66/env.sh; cd /tmp/ind66
for j in "$@"; do B=8; case $j in gpt2|bert) B=4;; esac
  /usr/bin/time -f "%e s" $P jobs.py --job $j --batch $B --mode record -o r/$j-b$B.json > logs/rec-$j.log 2>&1; done
