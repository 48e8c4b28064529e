#!/usr/bin/env bash
# A memory smoke test for a CI job, for your own model as for memdiag's
# cases: run the job (or take its reports), check the causes you expect and
# every peak against committed baseline reports, and write JUnit (the CI's
# test view), HTML (an artifact) and markdown (a pull-request comment), each
# starting with PASS or FAIL and what failed. Exit 0 when every gate holds,
# 1 when a gate fails, a peak grew beyond --max-increase or a baseline has no
# new report (a job whose batch, steps or length changed: both peaks are
# said; --refresh-baseline accepts it on purpose), 2 on unreadable reports
# or a usage error.
#
#   scripts/ci-memory-gate.sh [--refresh-baseline] OUT_DIR BASELINE_DIR [gate options] [--] [memory_diagnostics flags]
#
# What runs: the memory_diagnostics flags after the gate options, e.g. your
# case file: -- --case mymodel.json --batch-size-per-device 8 --device cpu
# (without --case or --plan: memdiag's reference plan,
# cases/plans/reference.json, whose expected causes are then the default
# --expect), or nothing with
# --reports DIR: reports already recorded (memdiag.record in your Python job,
# a plan run elsewhere).
#
# Gate options:
#   --expect CASE=CAUSE   a cause each report of CASE must have (repeatable)
#   --fail-on CAUSE       a cause no report may have (repeatable)
#   --max-increase X      how much a peak may grow over its baseline: 5% (the
#                         default), 0.05; a bare number above 1 is refused
#   --reports DIR         gate these reports instead of running anything
#
# The first baseline, and a change in memory accepted on purpose:
#   scripts/ci-memory-gate.sh --refresh-baseline ci-out memory-baseline -- --case mymodel.json
# runs the job, checks the causes (not the peaks) and, when they hold, makes
# BASELINE_DIR (or replaces its reports) from this run: review and commit it.
#
#   scripts/ci-memory-gate.sh ci-out tests/fixtures/cpu -- --device cpu       # memdiag's own, on the CPU
#   scripts/ci-memory-gate.sh ci-out memory-baseline --expect mymodel=activations -- --case mymodel.json
#
# The artifacts are written whatever the runs do (out of memory, a failure,
# a regression); the exit code is then the gate's, or, when every gate
# holds, the runs' own (3 when a run ran out of memory, 1 when one failed).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
usage="usage: scripts/ci-memory-gate.sh [--refresh-baseline] OUT_DIR BASELINE_DIR [--expect CASE=CAUSE] [--fail-on CAUSE] [--max-increase X] [--reports DIR] [-- memory_diagnostics flags]"
refresh=0
if [ "${1:-}" = "--refresh-baseline" ]; then refresh=1; shift; fi
[ "$#" -ge 2 ] || { echo "$usage" >&2; exit 2; }
case "$1$2" in -*) echo "ci-memory-gate: OUT_DIR and BASELINE_DIR come first ($usage)" >&2; exit 2 ;; esac
out="$1"
base="$2"
shift 2
expects=()
fail_on=()
max_increase="${MEMDIAG_MAX_INCREASE:-5%}"
reports=""
while [ "$#" -gt 0 ]; do
  case "$1" in
    --expect|--fail-on|--max-increase|--reports)
      [ "$#" -ge 2 ] || { echo "ci-memory-gate: $1 needs a value ($usage)" >&2; exit 2; }
      case "$1" in
        --expect) expects+=(--expect "$2") ;;
        --fail-on) fail_on+=(--fail-on "$2") ;;
        --max-increase) max_increase="$2" ;;
        --reports) reports="$2" ;;
      esac
      shift 2 ;;
    --) shift; break ;;
    *) break ;;  # the first that is not a gate option: memory_diagnostics's flags
  esac
done
run_flags=("$@")
usage_error() { echo "ci-memory-gate: $*" >&2; exit 2; }
bin="$MEMDIAG_BUILD_DIR/bin"
cmp="$bin/compare_memory_reports"
command -v compare_memory_reports >/dev/null 2>&1 && [ ! -x "$cmp" ] && cmp="$(command -v compare_memory_reports)"
[ -x "$cmp" ] || die "no compare_memory_reports (run scripts/build.sh, or pip install . for the Python package's)"
if [ -n "$reports" ] && [ "${#run_flags[@]}" -gt 0 ]; then
  usage_error "--reports $reports: the reports are gated as they are; nothing after -- runs with it"
fi
if [ "$refresh" = 0 ] && { [ ! -d "$base" ] || ! compgen -G "$base/*.json" >/dev/null; }; then
  usage_error "$base: no baseline reports yet: make the first with scripts/ci-memory-gate.sh --refresh-baseline $out $base ... (the same options), then commit $base"
fi
# A threshold the comparer refuses is said before anything runs (its own
# check: the flags are parsed before any report is read).
why="$("$cmp" /dev/null --baseline /dev/null --max-increase "$max_increase" 2>&1 | grep -m1 -- '--max-increase' || true)"
[ -z "$why" ] || usage_error "$why"
mkdir -p "$out"

run_rc=0
if [ -n "$reports" ]; then
  [ -d "$reports" ] || [ -f "$reports" ] || usage_error "--reports $reports: no such file or directory"
  gated="$reports"
else
  [ -x "$bin/memory_diagnostics" ] || die "no $bin/memory_diagnostics: run scripts/build.sh first (or gate recorded reports with --reports)"
  names_a_job=0
  for f in "${run_flags[@]}"; do case "$f" in --case|--case=*|--plan|--plan=*) names_a_job=1 ;; esac; done
  if [ "$names_a_job" = 0 ]; then
    run_flags=(--plan "$MEMDIAG_ROOT/cases/plans/reference.json" "${run_flags[@]}")
    [ "${#expects[@]}" -gt 0 ] || expects=(--expect alpha=activations --expect beta=optimizer_state --expect gamma=retained_graph)
  fi
  rm -rf "$out/reports"
  "$bin/memory_diagnostics" "${run_flags[@]}" --output-dir "$out/reports" || run_rc=$?
  [ -d "$out/reports" ] || die "the job wrote no reports (exit $run_rc)"
  gated="$out/reports"
fi
causes=("${expects[@]}" "${fail_on[@]}")

if [ "$refresh" = 1 ]; then
  [ "$run_rc" = 0 ] || die "the job did not complete (exit $run_rc): the baseline is left as it was"
  "$cmp" "$gated" "${causes[@]}" --format markdown -o "$out/summary.md" ||
    die "a cause gate failed (see $out/summary.md): the baseline is left as it was"
  mkdir -p "$base"
  rm -f "$base"/*.json
  if [ -d "$gated" ]; then cp "$gated"/*.json "$base"/; else cp "$gated" "$base"/; fi
  say "baseline $base: $(ls "$base"/*.json | wc -l) reports from $gated (causes held: ${causes[*]:-none given}); review and commit them"
  exit 0
fi
gates=("${causes[@]}" --baseline "$base" --max-increase "$max_increase")
rc=0
"$cmp" "$gated" "${gates[@]}" --format junit -o "$out/junit.xml" || rc=$?
# The same gates, for people: their exit codes are the one above.
"$cmp" "$gated" "${gates[@]}" --format html -o "$out/report.html" 2>/dev/null || true
"$cmp" "$gated" "${gates[@]}" --format markdown -o "$out/summary.md" 2>/dev/null || true
[ "$rc" != 0 ] || rc="$run_rc"
say "$(head -1 "$out/summary.md" | sed 's/^## //'): wrote $out/junit.xml, $out/report.html, $out/summary.md (runs exit $run_rc, exit $rc)"
exit "$rc"
