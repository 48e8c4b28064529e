#!/usr/bin/env bash
# The package installs with pip from its folder, as the README says, and the
# installed copy (not the source tree) records a loop: pip install into a
# scratch target, then the hook tests against that copy.
#   python/tests/install_check.sh PYTHON
set -euo pipefail
py="$1"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
target="$(mktemp -d)"
trap 'rm -rf "$target"' EXIT
# Offline: the build backend is the environment's own setuptools.
"$py" -m pip install --disable-pip-version-check -q --no-build-isolation --no-deps --no-index \
  --target "$target" "$here/.."
cd "$target"
PYTHONPATH="$target" "$py" -c 'import memdiag, os; assert memdiag.__file__.startswith(os.getcwd()), memdiag.__file__; print("installed", memdiag.__version__, "at", memdiag.__file__)'
PYTHONPATH="$target" MEMDIAG_TEST_INSTALLED=1 "$py" "$here/run.py" test_recorder.PhasesFromHooks
