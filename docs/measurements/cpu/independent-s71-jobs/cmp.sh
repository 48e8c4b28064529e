#!/bin/bash
# cmp.sh LOGNAME reports... [comparer options]: text output to logs/LOGNAME.txt (and stdout)
cd "$(dirname "$0")"
log=$1; shift
/tmp/s71/bin/compare_memory_reports "$@" > logs/$log.txt 2>&1; rc=$?
echo "# exit $rc" >> logs/$log.txt
cat logs/$log.txt
