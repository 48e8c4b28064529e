#!/bin/bash
# round 4: bracketing the true largest step of optvareager (768 MiB) and t5var (1024 MiB)
cd "$(dirname "$0")"
( ./run.sh cnt optvareager 4 2 776; ./run.sh cnt optvareager 4 2 790 ) > logs/measure4-a.log 2>&1 &
( ./run.sh cnt t5var 4 2 592; ./run.sh cnt t5var 4 2 604 ) > logs/measure4-b.log 2>&1 &
wait
