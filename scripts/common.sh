# Sourced by the other scripts: where things live, and the one LibTorch pin.
MEMDIAG_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MEMDIAG_HOME="${MEMDIAG_HOME:-$HOME/.cache/memdiag}"
MEMDIAG_VENV="${MEMDIAG_VENV:-$MEMDIAG_HOME/venv}"
MEMDIAG_BUILD_DIR="${MEMDIAG_BUILD_DIR:-$MEMDIAG_ROOT/build}"
MEMDIAG_TORCH_PIN="2.11.0"   # the GPU hosts' version; keep them equal
MEMDIAG_TORCHVISION_PIN="0.26.0"    # the GPU hosts' versions of the corpus's libraries (python/jobs)
MEMDIAG_TRANSFORMERS_PIN="5.17.0"
MEMDIAG_ACCELERATE_PIN="1.15.0"   # what transformers' Trainer needs (the Trainer test); the GPU hosts' version
MEMDIAG_SKBUILD_PIN="0.11.6"   # pyproject.toml's build backend, for the tests' offline pip install

# True when the venv holds the pinned torch (read from its metadata, no import).
venv_has_pinned_torch() {
  local d
  for d in "$MEMDIAG_VENV"/lib/python3*/site-packages/torch-"$MEMDIAG_TORCH_PIN"*.dist-info; do
    [ -d "$d" ] && [ -d "$(dirname "$d")/torch/share/cmake/Torch" ] && return 0
  done
  return 1
}

say() { printf 'memdiag: %s\n' "$*" >&2; }
die() { printf 'memdiag: error: %s\n' "$*" >&2; exit 1; }

# The CMake prefix of a LibTorch, in order: MEMDIAG_TORCH_PREFIX, the
# project's virtual environment, then whatever python3 imports as torch (the
# GPU hosts' system torch).
torch_prefix() {
  if [ -n "${MEMDIAG_TORCH_PREFIX:-}" ]; then echo "$MEMDIAG_TORCH_PREFIX"; return; fi
  # The venv's torch is found without importing it (an import takes seconds).
  local d
  for d in "$MEMDIAG_VENV"/lib/python3*/site-packages/torch/share/cmake; do
    if [ -d "$d/Torch" ]; then echo "$d"; return; fi
  done
  local py
  for py in "$MEMDIAG_VENV/bin/python" python3; do
    if command -v "$py" >/dev/null 2>&1 &&
       "$py" -c 'import torch' >/dev/null 2>&1; then
      "$py" -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null
      return
    fi
  done
}

# Splits the words given at "--": those before into the array specs, those
# after into extra (the memory_diagnostics flags a procedure passes on).
split_at_dashdash() {
  specs=()
  extra=()
  while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do specs+=("$1"); shift; done
  if [ "$#" -gt 0 ]; then shift; fi
  extra=("$@")
}

# For the procedures that start ranks: the built memory_diagnostics's folder
# (bin) and torchrun (runner, on PATH or the venv's); dies saying what to do
# where either is missing.
launcher_setup() {
  bin="$MEMDIAG_BUILD_DIR/bin"
  [ -x "$bin/memory_diagnostics" ] || die "no $bin/memory_diagnostics: run scripts/build.sh first"
  runner="$(command -v torchrun || echo "$MEMDIAG_VENV/bin/torchrun")"
  [ -x "$runner" ] || die "no torchrun (python3 -m pip install torch==$MEMDIAG_TORCH_PIN, or scripts/setup.sh)"
}
