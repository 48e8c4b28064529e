#!/usr/bin/env bash
# A new user's first hour, timed: clones this repository's HEAD into a
# fresh directory and runs the README's two commands there, printing how
# long each phase took: scripts/run.sh to its first verdict (its set-up, its
# build, its runs and their comparison), and, with --tests, scripts/test.sh
# (its build of the rest, then ctest).
#
#   scripts/first-hour.sh [--tests] [--fresh-venv]
#
# --fresh-venv installs LibTorch into a new virtual environment in the clone's
# directory (the 3 GB download a fresh machine makes) instead of the one
# setup.sh already made ($MEMDIAG_VENV). Debian packages already installed
# stay installed: on a machine without them setup.sh installs them, and that
# time is in its figure.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
tests=0
fresh_venv=0
for a in "$@"; do
  case "$a" in
    --tests) tests=1 ;;
    --fresh-venv) fresh_venv=1 ;;
    -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown argument '$a' (--tests, --fresh-venv)" ;;
  esac
done
work="$(mktemp -d "${TMPDIR:-/tmp}/memdiag-first-hour.XXXXXX")"
git clone -q --no-hardlinks "$MEMDIAG_ROOT" "$work/memdiag" || die "cannot clone $MEMDIAG_ROOT"
cd "$work/memdiag"
[ "$fresh_venv" = 1 ] && export MEMDIAG_VENV="$work/venv"
export MEMDIAG_REPORTS="$work/reports"
log="$work/log.txt"

seconds() { date +%s.%N; }
phase() {  # phase NAME COMMAND...: runs it, logs its output, prints its time
  local name="$1"; shift
  local t0; t0=$(seconds)
  if ! "$@" >>"$log" 2>&1; then
    tail -20 "$log" >&2
    die "$name failed after $(awk -v a="$t0" -v b="$(seconds)" 'BEGIN{printf "%.0f", b-a}') s (log: $log)"
  fi
  printf '%-34s %7.1f s\n' "$name" "$(awk -v a="$t0" -v b="$(seconds)" 'BEGIN{print b-a}')"
}

start=$(seconds)
echo "first hour from a fresh clone of $(git rev-parse --short HEAD) on $(nproc) cores, in $work"
# run.sh whole, as a user runs it: its set-up (the download with
# --fresh-venv), the build it needs (the report-reading half compiled while
# LibTorch downloads), the three runs and their comparison. Its milestones
# give the split.
phase "scripts/run.sh (to its first verdict)" scripts/run.sh
prev=0
while IFS= read -r line; do
  what="${line#memdiag: run.sh: }"
  at="${what##* at }"; at="${at% s}"; what="${what% at *}"
  printf '  %-32s %7.1f s (%.1f s in all)\n' "$what" "$(awk -v a="$prev" -v b="$at" 'BEGIN{print b-a}')" "$at"
  prev="$at"
done < <(grep '^memdiag: run.sh: ' "$log")
printf '%-34s %7.1f s\n' "first verdict, from the clone" "$(awk -v a="$start" -v b="$(seconds)" 'BEGIN{print b-a}')"
if [ "$tests" = 1 ]; then
  # test.sh whole: its set-up (nothing left to install), the build of the
  # tests, ctest.
  phase "scripts/test.sh" scripts/test.sh
  ctest_s=$(sed -n 's/^Total Test time (real) = *\([0-9.]*\) sec.*/\1/p' "$log" | tail -1)
  [ -n "$ctest_s" ] && printf '  %-32s %7.1f s\n' "of which ctest" "$ctest_s"
fi
