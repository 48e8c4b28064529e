#!/bin/bash
cd "$(dirname "$0")"
./run.sh clip --job clip
./run.sh w2v --job w2v
./run.sh moco-queue-s6 --job moco --mode queue --steps 6
./run.sh moco-queue-s12 --job moco --mode queue --steps 12
./run.sh moco-leak-s6 --job moco --mode leak --steps 6
./run.sh moco-leak-s12 --job moco --mode leak --steps 12
./run.sh multitask --job multitask
./run.sh gc-plain --job gc --mode plain
./run.sh gc-ckpt --job gc --mode ckpt --variant checkpointing
./run.sh resize-s6 --job resize --steps 6
./run.sh resize-s12 --job resize --steps 12
./run.sh reopt-once --job reopt --mode once --name reopt-once
./run.sh reopt-recreate --job reopt --mode recreate --name reopt-recreate
./run.sh reopt-clear --job reopt --mode clear --name reopt-clear
./run.sh foreach-foreach --job foreach --mode foreach --name foreach-foreach
./run.sh foreach-default --job foreach --mode default --name foreach-default
./run.sh ppo --job ppo --steps 16
./run.sh evalspike --job evalspike
echo ALLDONE
