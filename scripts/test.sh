#!/usr/bin/env bash
# The test suite, from a fresh clone: installs what is missing, builds, runs
# ctest. Without --all it leaves out the slow tier (ctest label `slow`: pip's
# own build of the package, the corpus of library jobs, the documents'
# commands run as written, the Python recorder's longer suites), which CI
# runs (.ci/run: scripts/test.sh --all). Other arguments go to ctest (for
# example -L unit).
#   scripts/test.sh [--all] [CTEST ARGUMENTS...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
all=0
args=()
for a in "$@"; do
  case "$a" in
    --all) all=1 ;;
    -h|--help) sed -n '2,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) args+=("$a") ;;
  esac
done
"$MEMDIAG_ROOT/scripts/setup.sh"
"$MEMDIAG_ROOT/scripts/setup.sh" tests  # the corpus's libraries: the tests' only
"$MEMDIAG_ROOT/scripts/build.sh"
cd "$MEMDIAG_BUILD_DIR"
if [ "$all" = 1 ]; then
  ctest --output-on-failure -j "$(nproc)" ${args[@]+"${args[@]}"}
else
  ctest --output-on-failure -j "$(nproc)" -LE slow ${args[@]+"${args[@]}"}
  slow=$(ctest -N -L slow | sed -n 's/^Total Tests: //p')
  echo "memdiag: the slow tier was not run (${slow:-its} tests, ctest -L slow): scripts/test.sh --all runs everything, as CI does"
fi
