#!/usr/bin/env bash
# The whole test suite, from a fresh clone: installs what is missing, builds,
# runs ctest. Extra arguments go to ctest (for example -L unit).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
"$MEMDIAG_ROOT/scripts/setup.sh"
"$MEMDIAG_ROOT/scripts/setup.sh" tests  # the corpus's libraries: the tests' only
"$MEMDIAG_ROOT/scripts/build.sh"
cd "$MEMDIAG_BUILD_DIR"
ctest --output-on-failure -j "$(nproc)" "$@"
