#!/usr/bin/env bash
# The memory smoke test of a CI job, as the README's worked example runs it:
# the reference plan in one process, then one comparison that gates the
# causes and checks every peak against committed baseline reports, written
# as JUnit (for the CI's test view), HTML (an artifact to look at) and
# markdown (a pull-request comment). Exit 0 when every gate holds, 1 when a
# gate fails or a peak grew beyond --max-increase, 2 on unreadable reports.
#
#   scripts/ci-memory-gate.sh OUT_DIR BASELINE_DIR [memory_diagnostics flags]
#   scripts/ci-memory-gate.sh ci-out tests/fixtures/h200            # a GPU runner
#   scripts/ci-memory-gate.sh ci-out tests/fixtures/cpu --device cpu
#   scripts/ci-memory-gate.sh --refresh-baseline ci-out tests/fixtures/cpu --device cpu
#
# The artifacts are written whatever the runs do (out of memory, a failure,
# a regression); the exit code is then the gate's, or, when every gate
# holds, the plan's own (3 when a run ran out of memory, 1 when one failed).
# --refresh-baseline: run the plan, check the causes (not the peaks), and
# when they hold replace BASELINE_DIR's reports with the new ones: commit
# them to accept a change in memory on purpose.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
refresh=0
if [ "${1:-}" = "--refresh-baseline" ]; then refresh=1; shift; fi
usage="usage: scripts/ci-memory-gate.sh [--refresh-baseline] OUT_DIR BASELINE_DIR [memory_diagnostics flags]"
out="${1:?$usage}"
base="${2:?$usage}"
shift 2
bin="$MEMDIAG_BUILD_DIR/bin"
[ -x "$bin/memory_diagnostics" ] || die "no $bin/memory_diagnostics: run scripts/build.sh first"
[ -d "$base" ] || die "$base: no such baseline directory"
mkdir -p "$out"
run_rc=0
"$bin/memory_diagnostics" --plan "$MEMDIAG_ROOT/cases/plans/reference.json" --output-dir "$out/reports" "$@" || run_rc=$?
[ -d "$out/reports" ] || die "the plan wrote no reports (exit $run_rc)"

causes=(--expect alpha=activations --expect beta=optimizer_state --expect gamma=retained_graph)
if [ "$refresh" = 1 ]; then
  [ "$run_rc" = 0 ] || die "the plan did not complete (exit $run_rc): the baseline is left as it was"
  "$bin/compare_memory_reports" "$out/reports" "${causes[@]}" --format markdown -o "$out/summary.md" ||
    die "a cause gate failed (see $out/summary.md): the baseline is left as it was"
  rm -f "$base"/*.json
  cp "$out"/reports/*.json "$base"/
  say "replaced $base with $(ls "$out"/reports/*.json | wc -l) reports from $out/reports: review and commit them"
  exit 0
fi
gates=("${causes[@]}" --baseline "$base" --max-increase "${MEMDIAG_MAX_INCREASE:-5%}")
rc=0
"$bin/compare_memory_reports" "$out/reports" "${gates[@]}" --format junit -o "$out/junit.xml" || rc=$?
# The same gates, for people: their exit codes are the one above.
"$bin/compare_memory_reports" "$out/reports" "${gates[@]}" --format html -o "$out/report.html" 2>/dev/null || true
"$bin/compare_memory_reports" "$out/reports" "${gates[@]}" --format markdown -o "$out/summary.md" 2>/dev/null || true
[ "$rc" != 0 ] || rc="$run_rc"
say "wrote $out/junit.xml, $out/report.html, $out/summary.md (runs exit $run_rc, exit $rc)"
exit "$rc"
