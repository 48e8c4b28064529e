#!/usr/bin/env bash
# The main job, from a fresh clone: installs what is missing, builds, runs the
# alpha, beta and gamma cases at their defaults on the default device (CUDA
# when present, else CPU), then compares them. Reports go to
# $MEMDIAG_REPORTS (default reports/). Extra arguments go to every
# memory_diagnostics run (for example --device cpu).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
t0=$(date +%s.%N)
# Milestones on stderr ("memdiag: run.sh: ... at N s"; scripts/first-hour.sh reads them).
milestone() { say "run.sh: $1 at $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"; }
"$MEMDIAG_ROOT/scripts/setup.sh" debian
if [ "${MEMDIAG_WITH_TORCH:-ON}" != OFF ] && [ -z "${MEMDIAG_TORCH_PREFIX:-}" ] && ! venv_has_pinned_torch; then
  # LibTorch's download (3 GB) and the report-reading half's build need
  # nothing of each other: the half without LibTorch is compiled while the
  # download runs, and the build with LibTorch keeps its objects.
  "$MEMDIAG_ROOT/scripts/setup.sh" torch &
  setup_pid=$!
  if ! MEMDIAG_WITH_TORCH=OFF MEMDIAG_BUILD_TARGETS=compare_memory_reports "$MEMDIAG_ROOT/scripts/build.sh" >/dev/null; then
    kill "$setup_pid" 2>/dev/null || true
    die "the build of compare_memory_reports failed (run scripts/build.sh to see why)"
  fi
  wait "$setup_pid" || die "installing LibTorch failed (see above)"
else
  "$MEMDIAG_ROOT/scripts/setup.sh" torch
fi
milestone "set up"
# Only what the job runs: the tests' targets wait for scripts/test.sh.
MEMDIAG_BUILD_TARGETS="memory_diagnostics compare_memory_reports" "$MEMDIAG_ROOT/scripts/build.sh" >/dev/null
milestone "built"
out="${MEMDIAG_REPORTS:-$MEMDIAG_ROOT/reports}"
mkdir -p "$out"
for c in alpha beta gamma; do
  "$MEMDIAG_BUILD_DIR/bin/memory_diagnostics" --case "$c" --output "$out/$c.json" "$@"
  echo
done
"$MEMDIAG_BUILD_DIR/bin/compare_memory_reports" "$out/alpha.json" "$out/beta.json" "$out/gamma.json"
milestone "first verdict"
