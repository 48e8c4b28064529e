#!/usr/bin/env bash
# Benchmark: how long compare_memory_reports takes over N reports (default
# 1000). The reports are made from the committed H200 fixtures, each given its
# own case name and batch size so that grouping and sweeps have real work.
# Prints the wall time of the best of 3 runs per output format.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
n="${1:-1000}"
cmp="$MEMDIAG_BUILD_DIR/bin/compare_memory_reports"
[ -x "$cmp" ] || die "no $cmp: run scripts/build.sh first"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
python3 - "$MEMDIAG_ROOT/tests/fixtures/h200" "$dir" "$n" <<'PY'
import json, os, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
base = [json.load(open(os.path.join(src, f))) for f in sorted(os.listdir(src)) if f.endswith(".json")]
for i in range(n):
    r = json.loads(json.dumps(base[i % len(base)]))
    r["case"]["name"] = f'{r["case"]["name"]}-{i // 50}'
    r["config"]["batch_size_per_device"] += i % 50
    with open(os.path.join(dst, f"r{i:05d}.json"), "w") as f:
        json.dump(r, f)
PY
bytes=$(du -sb "$dir" | cut -f1)
for fmt in text json; do
  best=""
  for _ in 1 2 3; do
    t0=$(date +%s%N)
    "$cmp" "$dir" --format "$fmt" >/dev/null
    ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    if [ -z "$best" ] || [ "$ms" -lt "$best" ]; then best=$ms; fi
  done
  printf 'compare_memory_reports: %d reports (%d MiB), --format %s: best of 3 %d ms\n' \
    "$n" $((bytes / 1048576)) "$fmt" "$best"
done
