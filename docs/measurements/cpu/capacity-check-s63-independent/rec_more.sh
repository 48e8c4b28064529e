#!/bin/bash
# second round: 4b recordings of the other jobs, and the counted run just under optvar's answer
cd "$(dirname "$0")"
( ./run.sh rec neoxaccum-b16 neoxaccum 16; ./run.sh rec mlpsgdm-b1024 mlpsgdm 1024; ./run.sh rec vitfrozen-b32 vitfrozen 32 ) &
( ./run.sh cnt optvar 4 3 981 > logs/measure-c.log ) &
wait
