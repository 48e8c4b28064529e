#!/bin/bash
cd "$(dirname "$0")"
./run.sh clip-b4 --job clip --batch 4
./run.sh clip-b16 --job clip --batch 16
./run.sh clip-b64 --job clip --batch 64
./run.sh multitask-b8 --job multitask --batch 8
./run.sh multitask-b32 --job multitask --batch 32
./run.sh w2v-b4 --job w2v --batch 4
./run.sh w2v-b16 --job w2v --batch 16
./run.sh distill-nograd-s3 --job distill --mode nograd --steps 3
./run.sh distill-nograd-s12 --job distill --mode nograd --steps 12
./run.sh moco-queue-s3 --job moco --mode queue --steps 3
./run.sh moco-queue-s8 --job moco --mode queue --steps 8
./run.sh moco-leak-s3 --job moco --mode leak --steps 3
./run.sh adv-fgsm-b16 --job adv --mode fgsm --batch 16
./run.sh adv-fgsm-b64 --job adv --mode fgsm --batch 64
./run.sh adv-pgd-b16 --job adv --mode pgd --batch 16
./run.sh adv-pgd-s3 --job adv --mode pgd --steps 3
echo ALLDONE
