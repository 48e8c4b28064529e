#!/usr/bin/env bash
# Copies the installed CLI11, nlohmann_json and GoogleTest CMake packages
# (headers, package configs, static libraries) and Gloo's headers into DIR, a relocatable
# prefix, for a host with no package registry (the GPU machines):
#
#   scripts/bundle-deps.sh .bundle            # here, where apt works
#   # there, with torch from its python3:
#   CMAKE_PREFIX_PATH=$PWD/.bundle scripts/build.sh
#
# The package configs locate themselves relative to their own file, so the
# layout under DIR mirrors /usr: DIR/include, DIR/share/cmake,
# DIR/lib/<multiarch>/cmake.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
dest="${1:?usage: scripts/bundle-deps.sh DIR}"
mkdir -p "$dest"
dest="$(cd "$dest" && pwd)"

pkgs=(libcli11-dev nlohmann-json3-dev libgtest-dev libgloo-dev)
# GTest's package config also declares GTest::gmock, whose library Debian
# ships separately; without it the config refuses to load.
dpkg -s libgmock-dev >/dev/null 2>&1 && pkgs+=(libgmock-dev)
count=0
for pkg in "${pkgs[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || die "$pkg is not installed (run scripts/setup.sh first)"
  while IFS= read -r f; do
    case "$pkg:$f" in
      libgloo-dev:/usr/include/*) ;;  # headers only: torch carries Gloo's code
      libgloo-dev:*) continue ;;
      *:/usr/include/*|*:/usr/share/cmake/*|*:/usr/lib/*) ;;
      *) continue ;;
    esac
    [ -f "$f" ] || continue
    rel="${f#/usr/}"
    mkdir -p "$dest/$(dirname "$rel")"
    cp -p "$f" "$dest/$rel"
    count=$((count + 1))
  done < <(dpkg -L "$pkg")
done
say "bundled $count files from ${pkgs[*]} into $dest ($(du -sh "$dest" | cut -f1))"
