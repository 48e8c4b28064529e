#!/bin/bash
# counted truth at the recorded batches and around each prediction (two streams)
cd "$(dirname "$0")"
( ./run.sh cnt effnet 4; ./run.sh cnt mlpsgdm 256; ./run.sh cnt vitfrozen 63; ./run.sh cnt vitfrozen 64; ./run.sh cnt effnet 65; ./run.sh cnt effnet 66; ./run.sh cnt effnet 67; ./run.sh cnt mlpsgdm 4478; ./run.sh cnt mlpsgdm 4568 ) > logs/measure-a.log 2>&1 &
( ./run.sh cnt t5 2; ./run.sh cnt optvar 4 4 0; ./run.sh cnt neoxaccum 32; ./run.sh cnt neoxaccum 34; ./run.sh cnt t5 30; ./run.sh cnt t5 31; ./run.sh cnt optvar 4 3 982; ./run.sh cnt optvar 4 3 1001 ) > logs/measure-b.log 2>&1 &
wait
