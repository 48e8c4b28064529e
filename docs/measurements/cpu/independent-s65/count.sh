export OMP_NUM_THREADS=1 PYTHONPATH=/work/main/python TORCH_EXTENSIONS_DIR=/tmp/ext
P=~/.cache/memdiag/venv/bin/python
for x in "$@"; do set -- ${x/:/ }; $P jobs.py --job $1 --batch $2 --steps 3 --mode count 2>&1 | tail -1; done
