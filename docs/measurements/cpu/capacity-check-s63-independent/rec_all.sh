#!/bin/bash
# every recording: two streams
cd "$(dirname "$0")"
( ./run.sh rec effnet-b4 effnet 4; ./run.sh rec effnet-b16 effnet 16; ./run.sh rec vitfrozen-b8 vitfrozen 8; ./run.sh rec mlpsgdm-b256 mlpsgdm 256 ) &
( ./run.sh rec t5-b2 t5 2; ./run.sh rec t5-b8 t5 8; ./run.sh rec neoxaccum-b4 neoxaccum 4; ./run.sh rec optvar-b4 optvar 4 4 ) &
wait
