#!/usr/bin/env bash
# The package installs with pip from the repository's root, as the README
# says, and gives a Python user both halves: the installed recorder (not the
# source tree's) records a loop, and the installed compare_memory_reports,
# built from this repository's C++ without LibTorch, reads its report and
# names a cause. The build happens outside the checkout, which is left as it
# was. Offline: the build backend is the environment's scikit-build-core.
#   python/tests/install_check.sh PYTHON
set -euo pipefail
py="$1"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
if ! "$py" -c 'import scikit_build_core' >/dev/null 2>&1; then
  echo "install_check: skipped: $py has no scikit-build-core (scripts/setup.sh installs it)"
  exit 77
fi
target="$(mktemp -d)"
trap 'rm -rf "$target"' EXIT
before="$(cd "$root" && ls -A; ls -A python)"
t0=$(date +%s)
"$py" -m pip install --disable-pip-version-check -q --no-build-isolation --no-deps --no-index \
  --prefix "$target/prefix" "$root"
echo "pip install of $root: $(( $(date +%s) - t0 )) s"
after="$(cd "$root" && ls -A; ls -A python)"
[ "$before" = "$after" ] || { echo "pip install wrote into the checkout:"; diff <(echo "$before") <(echo "$after"); exit 1; }
site="$(echo "$target"/prefix/lib/python3*/site-packages)"
cmp="$target/prefix/bin/compare_memory_reports"
[ -x "$cmp" ] || { echo "no compare_memory_reports in $target/prefix/bin"; exit 1; }
version="$(cat "$root/VERSION")"
"$cmp" --version | grep -qx "compare_memory_reports $version" || { echo "version: $("$cmp" --version), VERSION says $version"; exit 1; }
cd "$target"
PYTHONPATH="$site" "$py" -c "import memdiag, os; assert memdiag.__file__.startswith('$site'), memdiag.__file__; assert memdiag.__version__ == '$version', memdiag.__version__; assert os.path.isfile(os.path.join(os.path.dirname(memdiag.__file__), 'native', 'allocator_reading.cpp')), 'the native reading source is not installed'; print('installed', memdiag.__version__, 'at', memdiag.__file__)"
PYTHONPATH="$site" MEMDIAG_BIN="$target/prefix/bin" MEMDIAG_TEST_INSTALLED=1 "$py" "$here/run.py" test_recorder.PhasesFromHooks
# A user's own loop recorded by the installed package, read by the
# installed comparer: an optimizer whose state dwarfs a tiny batch.
PYTHONPATH="$site" "$py" - <<'PY'
import torch, memdiag
model = torch.nn.Sequential(torch.nn.Linear(512, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 512))
opt = torch.optim.AdamW(model.parameters())
with memdiag.record(model, opt, output="mine.json"):
    for _ in range(3):
        loss = model(torch.randn(2, 512)).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
PY
PATH="$target/prefix/bin:$PATH" compare_memory_reports mine.json --format json >verdict.json
"$py" -c "import json; g = json.load(open('verdict.json'))['groups'][0]; print('verdict:', g['dominant_cause']); assert g['dominant_cause'] == 'optimizer_state', g['dominant_cause']"
