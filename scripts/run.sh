#!/usr/bin/env bash
# The main job, from a fresh clone: installs what is missing, builds, runs the
# alpha, beta and gamma cases at their defaults on the default device (CUDA
# when present, else CPU), then compares them. Reports go to
# $MEMDIAG_REPORTS (default reports/). Extra arguments go to every
# memory_diagnostics run (for example --device cpu).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
"$MEMDIAG_ROOT/scripts/setup.sh"
# Only what the job runs: the tests' targets wait for scripts/test.sh.
MEMDIAG_BUILD_TARGETS="memory_diagnostics compare_memory_reports" "$MEMDIAG_ROOT/scripts/build.sh" >/dev/null
out="${MEMDIAG_REPORTS:-$MEMDIAG_ROOT/reports}"
mkdir -p "$out"
for c in alpha beta gamma; do
  "$MEMDIAG_BUILD_DIR/bin/memory_diagnostics" --case "$c" --output "$out/$c.json" "$@"
  echo
done
"$MEMDIAG_BUILD_DIR/bin/compare_memory_reports" "$out/alpha.json" "$out/beta.json" "$out/gamma.json"
