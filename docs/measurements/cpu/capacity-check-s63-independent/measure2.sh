#!/bin/bash
# round 2: other budgets (mlpsgdm 115 / 150 / 512 MiB, optvar 1400 MiB)
cd "$(dirname "$0")"
( ./run.sh cnt mlpsgdm 421; ./run.sh cnt mlpsgdm 430; ./run.sh cnt mlpsgdm 1799; ./run.sh cnt mlpsgdm 1835; ./run.sh cnt mlpsgdm 10718 2 ) > logs/measure2-a.log 2>&1 &
( ./run.sh cnt optvar 4 2 1865; ./run.sh cnt optvar 4 2 1902; ./run.sh cnt mlpsgdm 10932 2 ) > logs/measure2-b.log 2>&1 &
wait
