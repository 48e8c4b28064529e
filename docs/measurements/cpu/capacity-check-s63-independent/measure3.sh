#!/bin/bash
# round 3 (extra jobs): counted runs at the step-capacity answers of optvareager (768 MiB) and t5var (1024 MiB)
cd "$(dirname "$0")"
( ./run.sh cnt optvareager 4 2 921; ./run.sh cnt optvareager 4 2 940 ) > logs/measure3-a.log 2>&1 &
( ./run.sh cnt t5var 4 2 1017 ) > logs/measure3-b.log 2>&1 &
wait
