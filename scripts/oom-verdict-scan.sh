#!/usr/bin/env bash
# The out-of-memory verdict at every limit of a window, refereed by
# expandable segments (CUDA): at each limit one run with the allocator's
# defaults and one with expandable_segments:True, then the comparer's verdict
# on the default run alone. Where expandable segments complete and the
# defaults run out, stranded memory was the only obstacle: the verdict must be
# fragmentation; where both run out, it must not be.
#
#   scripts/oom-verdict-scan.sh DIR LOW HIGH STEP [memory_diagnostics flags]
#   scripts/oom-verdict-scan.sh /tmp/scan 2580 2700 10 --case epsilon --preset medium
#
# DIR/none-L.json, DIR/expandable-L.json: the reports; DIR/scan.txt: one
# line per limit (limit, default outcome and verdict, expandable outcome,
# whether the verdict agrees with the referee). Exit 1 when one disagrees.
# MEMDIAG_SCAN_JUDGE_ONLY=1: no runs; the reports already in DIR judged
# again by this build's comparer (after a change to the rule).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
[ "$#" -ge 4 ] || die "usage: scripts/oom-verdict-scan.sh DIR LOW HIGH STEP [memory_diagnostics flags]"
dir="$1" low="$2" high="$3" step="$4"
shift 4
flags=("$@")
[ "${#flags[@]}" -gt 0 ] || flags=(--case epsilon --preset medium)
bin="$MEMDIAG_BUILD_DIR/bin"
[ -x "$bin/compare_memory_reports" ] || die "no $bin/memory_diagnostics: run scripts/build.sh first"
mkdir -p "$dir"
if [ "${MEMDIAG_SCAN_NEEDS_CUDA:-0}" = 1 ] && [ "${MEMDIAG_SCAN_JUDGE_ONLY:-0}" != 1 ] &&
   ! "$bin/memory_diagnostics" -q --case alpha --preset small --steps 1 --device cuda -o "$dir/probe.json" 2>/dev/null; then
  echo "skipped: no CUDA device (the scan's referee is CUDA's expandable segments)"
  exit 77  # ctest's skip
fi
out="$dir/scan.txt"
echo "# scripts/oom-verdict-scan.sh $dir $low $high $step ${flags[*]}${MEMDIAG_SCAN_JUDGE_ONLY:+ (MEMDIAG_SCAN_JUDGE_ONLY=1: the reports judged again)}" > "$out"
printf '%-7s %-9s %-16s %-11s %s\n' limit default verdict expandable agrees >> "$out"

status_of() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$1"; }
outcome() { case "$1" in 0) echo complete ;; 3) echo oom ;; *) die "exit $1" ;; esac; }
verdict() {
  "$bin/compare_memory_reports" --format json "$1" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["groups"][0]["dominant_cause"])'
}

bad=0
for ((l = low; l <= high; l += step)); do
  if [ "${MEMDIAG_SCAN_JUDGE_ONLY:-0}" = 1 ]; then
    d=$(status_of "$dir/none-$l.json"); e=$(status_of "$dir/expandable-$l.json")
  else
    rc=0; "$bin/memory_diagnostics" -q "${flags[@]}" --memory-limit-mib "$l" -o "$dir/none-$l.json" || rc=$?
    d=$(outcome "$rc")
    rc=0; "$bin/memory_diagnostics" -q "${flags[@]}" --memory-limit-mib "$l" --remedy expandable-segments \
            -o "$dir/expandable-$l.json" || rc=$?
    e=$(outcome "$rc")
  fi
  v=$(verdict "$dir/none-$l.json")
  agrees=yes
  if [ "$d" = oom ] && [ "$e" = complete ] && [ "$v" != fragmentation ]; then agrees=no; fi
  if [ "$d" = oom ] && [ "$e" = oom ] && [ "$v" = fragmentation ]; then agrees=no; fi
  [ "$agrees" = yes ] || bad=1
  printf '%-7s %-9s %-16s %-11s %s\n' "$l" "$d" "$v" "$e" "$agrees" | tee -a "$out"
done
exit "$bad"
