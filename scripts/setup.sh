#!/usr/bin/env bash
# Installs what memdiag needs to build and test, and nothing that is already
# there: Debian packages (compiler, CMake, Ninja, CLI11, nlohmann_json,
# GoogleTest, Gloo's headers) and LibTorch from the PyPI wheel torch==2.11.0 in a virtual
# environment outside the work tree ($MEMDIAG_VENV, default
# ~/.cache/memdiag/venv). On a machine where it already ran it downloads
# nothing and takes seconds.
#
#   scripts/setup.sh [debian] [torch] [tests]   the steps to take (default: debian and torch)
#
# tests (scripts/test.sh takes it): the packages only the tests use: Debian's
# chromium (the HTML report in a real browser), clang and libFuzzer
# (scripts/fuzz.sh), and into the same environment torchvision and
# transformers at the GPU machine's versions, for the corpus of library jobs
# (python/jobs), with accelerate, which transformers' Trainer needs.
#
#   MEMDIAG_SKIP_APT=1     skip the Debian step (not root, or packages managed elsewhere)
#   MEMDIAG_WITH_TORCH=OFF skip LibTorch (build only the report-reading half)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

start=$(date +%s)
do_debian=1
do_torch=1
do_tests=0
if [ "$#" -gt 0 ]; then
  do_debian=0
  do_torch=0
  for a in "$@"; do
    case "$a" in
      debian) do_debian=1 ;;
      torch) do_torch=1 ;;
      tests) do_tests=1 ;;
      -h|--help) sed -n '2,18p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
      *) die "setup.sh: unknown step '$a' (debian, torch, tests)" ;;
    esac
  done
fi

# --- Debian packages --------------------------------------------------------
# Installs those of the packages given that are missing (MEMDIAG_SKIP_APT=1:
# names them instead).
install_debian() {
  local need=() pkg
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
  done
  # A python3 that can make virtual environments already (pyenv, say) does
  # not need Debian's python3-venv.
  if python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    need=("${need[@]/python3-venv}")
  fi
  need=($(printf '%s\n' "${need[@]}" | grep -v '^$' || true))
  if [ "${#need[@]}" -eq 0 ]; then
    say "Debian packages: all present ($*)"
  elif [ "${MEMDIAG_SKIP_APT:-0}" = 1 ]; then
    say "missing Debian packages (MEMDIAG_SKIP_APT=1, not installing): ${need[*]}"
  else
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    say "installing Debian packages: ${need[*]}"
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${need[@]}"
  fi
}
# What building needs; the tests' own (a real browser for the HTML report,
# clang and libFuzzer for scripts/fuzz.sh) come with the tests step, so a
# first verdict does not wait for them.
if [ "$do_debian" = 1 ]; then
  install_debian g++ cmake ninja-build libcli11-dev nlohmann-json3-dev libgtest-dev libgloo-dev python3-venv
fi
if [ "$do_tests" = 1 ]; then
  install_debian chromium clang libclang-rt-dev
fi

# --- LibTorch -------------------------------------------------------------
if [ "$do_torch" = 0 ]; then
  :
elif [ "${MEMDIAG_WITH_TORCH:-ON}" = OFF ]; then
  say "MEMDIAG_WITH_TORCH=OFF: not installing LibTorch"
elif [ -n "${MEMDIAG_TORCH_PREFIX:-}" ]; then
  say "using the LibTorch at MEMDIAG_TORCH_PREFIX=$MEMDIAG_TORCH_PREFIX"
elif venv_has_pinned_torch; then
  say "LibTorch $MEMDIAG_TORCH_PIN: present in $MEMDIAG_VENV"
else
  say "installing torch==$MEMDIAG_TORCH_PIN (LibTorch and its CUDA libraries, about 3 GB) into $MEMDIAG_VENV"
  mkdir -p "$(dirname "$MEMDIAG_VENV")"
  [ -x "$MEMDIAG_VENV/bin/python" ] || python3 -m venv "$MEMDIAG_VENV"
  "$MEMDIAG_VENV/bin/python" -m pip install --disable-pip-version-check -q --upgrade pip
  # pip's own progress bars show the download on a terminal.
  "$MEMDIAG_VENV/bin/python" -m pip install --disable-pip-version-check "torch==$MEMDIAG_TORCH_PIN"
fi

# The package (pyproject.toml: the recorder and the comparer built without
# LibTorch) builds with scikit-build-core; the tests install it with pip
# --no-build-isolation, offline, from this environment's copy.
if [ "$do_torch" = 1 ] && [ "${MEMDIAG_WITH_TORCH:-ON}" != OFF ] && [ -x "$MEMDIAG_VENV/bin/python" ] &&
   ! "$MEMDIAG_VENV/bin/python" -c "import scikit_build_core, sys; sys.exit(scikit_build_core.__version__ != '$MEMDIAG_SKBUILD_PIN')" >/dev/null 2>&1; then
  say "installing scikit-build-core==$MEMDIAG_SKBUILD_PIN into $MEMDIAG_VENV (builds the Python package)"
  "$MEMDIAG_VENV/bin/python" -m pip install --disable-pip-version-check -q "scikit-build-core==$MEMDIAG_SKBUILD_PIN"
fi

# The PyPI wheel is a CUDA build; its CMake package needs the CUDA toolkit to
# configure, even to run on the CPU.
if [ "$do_torch" = 1 ] && [ "${MEMDIAG_WITH_TORCH:-ON}" != OFF ] && ! command -v nvcc >/dev/null 2>&1 && [ ! -x /usr/local/cuda/bin/nvcc ]; then
  say "warning: no nvcc found; the PyPI LibTorch's CMake package needs the CUDA toolkit"
  say "         (or point MEMDIAG_TORCH_PREFIX at a CPU LibTorch; see README)"
fi

# --- the tests' own packages -------------------------------------------------
if [ "$do_tests" = 1 ] && [ "${MEMDIAG_WITH_TORCH:-ON}" != OFF ] && [ -x "$MEMDIAG_VENV/bin/python" ]; then
  # Their installed versions read from the packages' metadata: importing
  # them (torch with them) took 6 of test.sh's seconds.
  if "$MEMDIAG_VENV/bin/python" -c "from importlib.metadata import version; import sys
sys.exit(not (version('torchvision').startswith('$MEMDIAG_TORCHVISION_PIN') and version('transformers') == '$MEMDIAG_TRANSFORMERS_PIN'
              and version('accelerate') == '$MEMDIAG_ACCELERATE_PIN'))" \
       >/dev/null 2>&1; then
    say "the tests' packages (torchvision $MEMDIAG_TORCHVISION_PIN, transformers $MEMDIAG_TRANSFORMERS_PIN, accelerate $MEMDIAG_ACCELERATE_PIN): present"
  else
    say "installing the tests' packages: torchvision==$MEMDIAG_TORCHVISION_PIN transformers==$MEMDIAG_TRANSFORMERS_PIN accelerate==$MEMDIAG_ACCELERATE_PIN"
    "$MEMDIAG_VENV/bin/python" -m pip install --disable-pip-version-check -q \
      "torch==$MEMDIAG_TORCH_PIN" "torchvision==$MEMDIAG_TORCHVISION_PIN" "transformers==$MEMDIAG_TRANSFORMERS_PIN" \
      "accelerate==$MEMDIAG_ACCELERATE_PIN"
  fi
fi

say "setup done in $(( $(date +%s) - start )) s"
