#!/usr/bin/env bash
# The comparer of the commit named in after.txt on this folder's reports as
# recorded (the fixes of session 68 in the analysis), and the restart
# attempts' launch ids recorded again (that fix is in the recorder).
cd "$(dirname "$0")"
CMP=${MEMDIAG_BIN:-../../../../build/bin}/compare_memory_reports
echo "commit $(git rev-parse --short HEAD)"
show() { echo; echo "== $*"; $CMP "$@" 2>&1 | grep -E "$PATTERN" | cut -c1-600; }
PATTERN="^dominant|forward adds|DDP's gradient buckets|^capacity"
show r/j3-rank0.json r/j3-rank1.json --budget-mib 512
show r/j1-rank0.json r/j1-rank1.json --budget-mib 512
show r/j11-0.json r/j11-1.json --budget-mib 512
PATTERN="grew to|step\(\) itself|^response"
show r/j8-rank0.json r/j8-rank1.json
PATTERN="imbalanced"
show r/j7-rank0.json r/j7-rank1.json
PATTERN="failed:"
show r/j9c-a0-rank0.json r/j9c-a0-rank1.json r/j9c-a1-rank0.json r/j9c-a1-rank1.json
