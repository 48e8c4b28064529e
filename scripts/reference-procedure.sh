#!/usr/bin/env bash
# The seed exercise's reference procedure with this project's executables, as
# one call of its plan (cases/plans/reference.json): the three default runs,
# the alpha batch sweep, beta at the medium preset and gamma at 10 steps, in
# one process, then the comparison of all of them. Reports go to DIR; extra
# arguments go to memory_diagnostics (for example --device cpu).
#
#   scripts/reference-procedure.sh reports/h200
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
dir="${1:?usage: scripts/reference-procedure.sh DIR [memory_diagnostics flags]}"
shift
bin="$MEMDIAG_BUILD_DIR/bin"
[ -x "$bin/memory_diagnostics" ] || die "no $bin/memory_diagnostics: run scripts/build.sh first"
"$bin/memory_diagnostics" --plan "$MEMDIAG_ROOT/cases/plans/reference.json" --output-dir "$dir" "$@"
echo
"$bin/compare_memory_reports" "$dir"
