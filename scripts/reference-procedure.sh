#!/usr/bin/env bash
# The seed exercise's reference procedure with this project's executables:
# the three default runs, the comparison, the alpha batch sweep, beta at the
# medium preset and gamma at 10 steps, then the comparison of all of them.
# Reports go to DIR; each run's wall time is printed. Extra arguments go to
# every memory_diagnostics run (for example --device cpu).
#
#   scripts/reference-procedure.sh reports/h200
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
dir="${1:?usage: scripts/reference-procedure.sh DIR [memory_diagnostics flags]}"
shift
mkdir -p "$dir"
bin="$MEMDIAG_BUILD_DIR/bin"
[ -x "$bin/memory_diagnostics" ] || die "no $bin/memory_diagnostics: run scripts/build.sh first"

diag() {
  local t0 ms
  t0=$(date +%s%N)
  "$bin/memory_diagnostics" --quiet "$@"
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  printf 'wall %4d.%03d s  memory_diagnostics %s\n' $((ms / 1000)) $((ms % 1000)) "$*"
}

diag --case alpha --output "$dir/alpha.json" "$@"
diag --case beta --output "$dir/beta.json" "$@"
diag --case gamma --output "$dir/gamma.json" "$@"
diag --case alpha --batch-size-per-device 1 --output "$dir/alpha-batch1.json" "$@"
diag --case alpha --batch-size-per-device 4 --output "$dir/alpha-batch4.json" "$@"
diag --case beta --preset medium --batch-size-per-device 1 --output "$dir/beta-medium.json" "$@"
diag --case gamma --steps 10 --output "$dir/gamma-steps10.json" "$@"
echo
"$bin/compare_memory_reports" "$dir"
