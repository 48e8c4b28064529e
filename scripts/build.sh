#!/usr/bin/env bash
# Configures and builds memdiag into $MEMDIAG_BUILD_DIR (default build/).
# Executables land in build/bin/. Extra arguments go to CMake's configure
# step (for example -DMEMDIAG_BUILD_TESTS=OFF). Does not install anything:
# scripts/setup.sh does that.
#
#   MEMDIAG_WITH_TORCH=OFF   only the report-reading half, no LibTorch needed
#   MEMDIAG_BUILD_TARGETS="a b"  build only those targets (default: all)
#   MEMDIAG_WARNINGS_AS_ERRORS=ON  any warning in memdiag's own code fails the build (CI)
#   MEMDIAG_TORCH_PREFIX=DIR a LibTorch of your own (its share/cmake)
#   CMAKE_PREFIX_PATH=...    more packages (the offline bundle on GPU hosts)
#   CXX=g++                  the compiler of a new build directory (default:
#                            clang++ where installed and it builds here,
#                            else the system's c++; a clean build took 278
#                            CPU-seconds with clang++ 14, 386 with g++ 12, on
#                            the 2-core machine)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

with_torch="${MEMDIAG_WITH_TORCH:-ON}"
werror="${MEMDIAG_WARNINGS_AS_ERRORS:-OFF}"
prefix="${CMAKE_PREFIX_PATH:-}"
if [ "$with_torch" != OFF ]; then
  tp="$(torch_prefix)"
  [ -n "$tp" ] || die "no LibTorch found: run scripts/setup.sh, or set MEMDIAG_TORCH_PREFIX"
  prefix="$tp${prefix:+;$prefix}"
fi

generator=()
command -v ninja >/dev/null 2>&1 && generator=(-G Ninja)
# Configure on the first build, or when asked to change something; later
# builds let CMake re-run itself only when its inputs changed.
if [ ! -f "$MEMDIAG_BUILD_DIR/CMakeCache.txt" ] || [ "$#" -gt 0 ] ||
   ! grep -q "^MEMDIAG_WITH_TORCH:BOOL=$with_torch\$" "$MEMDIAG_BUILD_DIR/CMakeCache.txt" ||
   ! grep -q "^MEMDIAG_WARNINGS_AS_ERRORS:BOOL=$werror\$" "$MEMDIAG_BUILD_DIR/CMakeCache.txt"; then
  say "configuring $MEMDIAG_BUILD_DIR"
  mkdir -p "$MEMDIAG_BUILD_DIR"
  log="$MEMDIAG_BUILD_DIR/configure.log"
  # configure [COMPILER FLAG]: the caller's arguments last, so that they win.
  configure() {
    cmake -S "$MEMDIAG_ROOT" -B "$MEMDIAG_BUILD_DIR" "${generator[@]}" "$@" \
      -DCMAKE_PREFIX_PATH="$prefix" -DMEMDIAG_WITH_TORCH="$with_torch" -DMEMDIAG_WARNINGS_AS_ERRORS="$werror" \
      ${user_args[@]+"${user_args[@]}"} >"$log" 2>&1
  }
  user_args=("$@")
  if [ -f "$MEMDIAG_BUILD_DIR/CMakeCache.txt" ]; then
    generator=()  # the cache keeps its generator and compiler
    configure || { cat "$log" >&2; die "CMake configure failed (log: $log)"; }
  elif [ -z "${CXX:-}" ] && command -v clang++ >/dev/null 2>&1 &&
       printf '#include <string>\nint main() { return std::string("x").size() == 1 ? 0 : 1; }\n' |
         clang++ -std=c++17 -x c++ - -o /dev/null >/dev/null 2>&1 &&
       configure -DCMAKE_CXX_COMPILER=clang++; then
    :  # clang++, which compiles and links a C++17 program here and which LibTorch's CMake (and nvcc, its host compiler) accepted
  else
    # The system's compiler: no clang++, one that cannot build here, or a
    # configure that failed with it (a clang newer than nvcc accepts as
    # LibTorch's CUDA host compiler) and starts again without it.
    rm -rf "$MEMDIAG_BUILD_DIR/CMakeCache.txt" "$MEMDIAG_BUILD_DIR/CMakeFiles"
    configure || { cat "$log" >&2; die "CMake configure failed (log: $log)"; }
  fi
fi
# MEMDIAG_BUILD_TARGETS: only these (run.sh's two executables first; the
# tests' targets when test.sh builds the rest).
targets=()
[ -n "${MEMDIAG_BUILD_TARGETS:-}" ] && targets=(--target ${MEMDIAG_BUILD_TARGETS})
say "building ${MEMDIAG_BUILD_TARGETS:-everything} ($(nproc) jobs)"
cmake --build "$MEMDIAG_BUILD_DIR" -j "$(nproc)" "${targets[@]}"
