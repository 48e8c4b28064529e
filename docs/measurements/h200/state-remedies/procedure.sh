#!/usr/bin/env bash
# Issue 40's remedies on the H200 (session 46): the reports of
# tests/fixtures/h200-state/ and the logs beside this file. Each remedy runs
# in a process of its own (--isolate) so its host figures are its alone.
# R: where the reports go.
set -u
B=build/bin/memory_diagnostics
R=${R:-/tmp/state-remedies}
mkdir -p $R/beta $R/alpha $R/billion $R/billion-limit $R/xcheck
$B --device cuda --isolate --case beta --preset medium --steps 6 \
   --remedy none,state-bf16,state-8bit,adafactor,offload-state,sgd -o "$R/beta/beta-{remedy}.json"
$B --device cuda --isolate --case alpha --preset medium --steps 4 \
   --remedy none,offload-activations,split=4,accumulate=4,checkpoint -o "$R/alpha/alpha-{remedy}.json"
$B --device cuda --isolate --case docs/measurements/h200/state-remedies/billion.json --steps 4 \
   --remedy none,state-bf16,state-8bit,adafactor,offload-state,sgd -o "$R/billion/billion-{remedy}.json"
$B --device cuda --isolate --case docs/measurements/h200/state-remedies/billion.json --steps 2 --memory-limit-mib 12288 \
   --remedy none,state-bf16,state-8bit,adafactor,offload-state -o "$R/billion-limit/billion-{remedy}.json"
$B --device cuda -q --case beta --steps 10 --remedy none,adafactor,offload-state,state-bf16,state-8bit \
   -o "$R/xcheck/beta-{remedy}.json"
(cd scripts && python3 crosscheck-optimizers.py $R/xcheck/*.json --device cuda) > crosscheck-optimizers-cuda.txt
# The fixtures: the four directories' reports side by side (the limited
# run's files renamed billion-limit-*, '=' dropped from file names), then
#   compare_memory_reports tests/fixtures/h200-state --format markdown
