#!/usr/bin/env bash
# The package installs with pip from its folder, as the README says, and the
# installed copy (not the source tree) records a loop: pip install into a
# scratch target, then the hook tests against that copy.
#   python/tests/install_check.sh PYTHON
set -euo pipefail
py="$1"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
target="$(mktemp -d)"
trap 'rm -rf "$root_target"' EXIT
root_target="$target"
# From a copy: setuptools builds inside the folder it installs from, and a
# test leaves the work tree as it found it. Offline: the build backend is
# the environment's own setuptools.
mkdir "$target/src" "$target/site"
cp -r "$here/../pyproject.toml" "$here/../README.md" "$here/../memdiag" "$target/src/"
"$py" -m pip install --disable-pip-version-check -q --no-build-isolation --no-deps --no-index \
  --target "$target/site" "$target/src"
target="$target/site"
cd "$target"
PYTHONPATH="$target" "$py" -c 'import memdiag, os; assert memdiag.__file__.startswith(os.getcwd()), memdiag.__file__; print("installed", memdiag.__version__, "at", memdiag.__file__)'
PYTHONPATH="$target" MEMDIAG_TEST_INSTALLED=1 "$py" "$here/run.py" test_recorder.PhasesFromHooks
