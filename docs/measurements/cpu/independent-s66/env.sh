export OMP_NUM_THREADS=1 PYTHONPATH=/work/main/python TORCH_EXTENSIONS_DIR=/tmp/ext MEMDIAG_BIN=/work/main/build/bin
P=~/.cache/memdiag/venv/bin/python
CMP=/work/main/build/bin/compare_memory_reports
