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
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
out="${1:?usage: scripts/ci-memory-gate.sh OUT_DIR BASELINE_DIR [memory_diagnostics flags]}"
base="${2:?usage: scripts/ci-memory-gate.sh OUT_DIR BASELINE_DIR [memory_diagnostics flags]}"
shift 2
bin="$MEMDIAG_BUILD_DIR/bin"
[ -x "$bin/memory_diagnostics" ] || die "no $bin/memory_diagnostics: run scripts/build.sh first"
[ -d "$base" ] || die "$base: no such baseline directory"
mkdir -p "$out"
"$bin/memory_diagnostics" --plan "$MEMDIAG_ROOT/cases/plans/reference.json" --output-dir "$out/reports" "$@"

gates=(--expect alpha=activations --expect beta=optimizer_state --expect gamma=retained_graph
       --baseline "$base" --max-increase "${MEMDIAG_MAX_INCREASE:-5%}")
rc=0
"$bin/compare_memory_reports" "$out/reports" "${gates[@]}" --format junit -o "$out/junit.xml" || rc=$?
# The same gates, for people: their exit codes are the one above.
"$bin/compare_memory_reports" "$out/reports" "${gates[@]}" --format html -o "$out/report.html" 2>/dev/null || true
"$bin/compare_memory_reports" "$out/reports" "${gates[@]}" --format markdown -o "$out/summary.md" 2>/dev/null || true
say "wrote $out/junit.xml, $out/report.html, $out/summary.md (exit $rc)"
exit "$rc"
