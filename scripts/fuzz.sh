#!/usr/bin/env bash
# Runs the libFuzzer targets (tests/fuzz, built by the "fuzz" preset with
# clang, ASan and UBSan) for SECONDS each: the report pipeline (reader,
# analysis, every renderer, gates, baseline) and the case-file reader.
# Each target starts from the committed seed corpus (tests/fuzz/corpus/T)
# and keeps what it learns in build-fuzz/corpus-T. An input that crashes a
# target is copied to tests/fuzz/regressions/T (replayed by the ordinary
# test suite from then on) and the script exits 1. Prints executions,
# coverage and corpus size per target.
#
#   scripts/fuzz.sh 60             # every target, a minute each (what CI runs)
#   scripts/fuzz.sh 1800 report    # one target, 30 minutes
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
secs="${1:?usage: scripts/fuzz.sh SECONDS [report|case ...]}"
shift
targets=("$@")
[ "${#targets[@]}" -gt 0 ] || targets=(report case plan flags)
command -v clang++ >/dev/null || die "clang++ not found: install Debian's clang (scripts/setup.sh does)"
dir="$MEMDIAG_ROOT/build-fuzz"
cd "$MEMDIAG_ROOT"
[ -f "$dir/build.ninja" ] || cmake --preset fuzz >/dev/null
cmake --build --preset fuzz >/dev/null
status=0
for t in "${targets[@]}"; do
  exe="$dir/bin/fuzz_$t"
  [ -x "$exe" ] || die "no fuzz target '$t' (report, case, plan, flags)"
  work="$dir/corpus-$t"
  crashes="$dir/crashes-$t"
  mkdir -p "$work" "$crashes"
  log="$dir/fuzz-$t.log"
  say "fuzz_$t: $secs s"
  rc=0
  # -timeout: an input that takes 10 s is a hang; -rss_limit_mb: one that
  # needs 2 GiB is unbounded memory. Both count as crashes.
  "$exe" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$crashes/" "$work" "tests/fuzz/corpus/$t" > "$log" 2>&1 || rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo "?")
  size=$(ls "$work" | wc -l)
  echo "fuzz_$t: $secs s, $execs executions, coverage $cov edges ($ft features), corpus $size inputs, exit $rc"
  if [ "$rc" != 0 ]; then
    mkdir -p "tests/fuzz/regressions/$t"
    for f in "$crashes"/*; do [ -f "$f" ] && cp "$f" "tests/fuzz/regressions/$t/"; done
    tail -n 40 "$log" >&2
    say "fuzz_$t found a crash: kept under tests/fuzz/regressions/$t; fix it and commit the input"
    status=1
  fi
done
exit "$status"
