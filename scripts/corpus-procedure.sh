#!/usr/bin/env bash
# The corpus of real jobs (python/jobs/corpus.py: torchvision and Hugging Face
# models from configurations, each clean or with a realistic bug), every job
# recorded at one size, then judged by the comparer against the cause its
# design implies (python/jobs/expected.json, written before any ran).
#
#   scripts/corpus-procedure.sh DIR [cpu|gpu] [python]
#
# DIR/NAME.json: the reports; DIR/NAME.log: each job's output;
# DIR/corpus.md: one row per job (bug, expected cause, verdict, what was kept,
# the module type holding most of the forward, the samples and tokens the
# recorder read); exit 1 when a verdict is not the expected cause nor, for a
# bug that keeps memory every step, the retained graph that names it.
#
#   MEMDIAG_CORPUS_EXPECT=FILE   also exit 1 when corpus.md differs from FILE
#                                (the committed table the README quotes; its
#                                lines starting "# " say how it was made)
#   MEMDIAG_CORPUS_JUDGE_ONLY=1  run nothing: judge the reports already in DIR
#                                (the H200's, committed, with today's rules;
#                                needs no torch)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
dir="${1:?usage: scripts/corpus-procedure.sh DIR [cpu|gpu] [python]}"
size="${2:-cpu}"
py="${3:-python3}"
cmp="$MEMDIAG_BUILD_DIR/bin/compare_memory_reports"
[ -x "$cmp" ] || die "no $cmp: run scripts/build.sh first"
judge_only="${MEMDIAG_CORPUS_JUDGE_ONLY:-0}"
# The corpus's libraries are the tests' (scripts/setup.sh tests): without
# them the procedure cannot run, and says so (77: ctest's skip).
if [ "$judge_only" != 1 ] && ! "$py" -c 'import torchvision, transformers' >/dev/null 2>&1; then
  say "corpus: skipped: $py has no torchvision or transformers (scripts/setup.sh tests installs them)"
  exit 77
fi
mkdir -p "$dir"
corpus="$MEMDIAG_ROOT/python/jobs/corpus.py"
if [ "$judge_only" != 1 ] && [ "$size" = cpu ]; then
  # On the CPU every job runs in a child of one process that imported the
  # libraries once (corpus.py run-all): the same jobs, without 14 imports of
  # torch, torchvision and transformers. On CUDA each job is a process of its
  # own, as a user's job is.
  # A job that fails leaves no report, which the judging below names.
  { "$py" "$corpus" run-all --size cpu --dir "$dir" 2>&1 || true; } | while read -r line; do say "$line"; done
else
  for job in $([ "$judge_only" = 1 ] || "$py" "$corpus" list); do
    t0=$(date +%s.%N)
    rc=0
    "$py" "$corpus" run "$job" --size "$size" -o "$dir/$job.json" > "$dir/$job.log" 2>&1 || rc=$?
    say "corpus: $job ($size) exit $rc in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
  done
fi
"$py" - "$dir" "$size" "$cmp" "$MEMDIAG_ROOT/python/jobs/expected.json" <<'PY'
import json, os, subprocess, sys
folder, size, cmp, expected_path = sys.argv[1:5]
expected = {e["job"]: e for e in json.load(open(expected_path)) if e["size"] == size}
rows, bad = [], 0
for job in sorted(expected):
    e = expected[job]
    path = os.path.join(folder, job + ".json")
    if not os.path.exists(path):
        rows.append((job, e["bug"] or "-", e["expected_cause"], "no report", "-", "-", "-", "no"))
        bad = 1
        continue
    g = json.loads(subprocess.run([cmp, "--format", "json", path], capture_output=True, text=True).stdout)["groups"][0]
    report = json.load(open(path))
    verdict = g["dominant_cause"]
    kept = [k for x in g["evidence_data"] if x["code"] == "kept_across_steps" for k in x["kept"]]
    mods = [x for x in g["evidence_data"] if x["code"] == "forward_by_module"]
    where = "-"
    if mods and mods[0]["types"]:
        top = mods[0]["types"][0]
        where = (f"{top['type']}'s own ops" if top["type"] == mods[0]["model_type"] else top["type"]) + \
            f" {100 * top['share']:.0f}%"
    parts = [f"{k['made_by']} {k['mib_per_step']:.1f} MiB/step" for k in kept if k["what"] == "tensor" and k.get("made_by")]
    unnamed = [k for k in kept if k["what"] == "tensor" and not k.get("made_by")]
    if unnamed:
        parts.append(f"{sum(k['per_step'] for k in unnamed)} other tensors "
                     f"{sum(k['mib_per_step'] for k in unnamed):.1f} MiB/step")
    parts += [k["what"].replace("_", " ") for k in kept if k["what"] != "tensor"]
    named = "; ".join(parts) or "-"
    forwards = [s for s in report["samples"] if s["phase"] == "forward"]
    samples = sorted({s.get("samples") for s in forwards if s.get("samples")})
    tokens = sorted({s.get("tokens") for s in forwards if s.get("tokens")})
    read = (f"{samples[0]}" if len(samples) == 1 else f"{samples[0]}-{samples[-1]}" if samples else "?") + \
        (f" / {tokens[0]}" if len(tokens) == 1 else f" / {tokens[0]}-{tokens[-1]}" if tokens else "")
    keeps = e.get("expected_kept_per_step_mib") or 0
    ok = verdict == e["expected_cause"] or (keeps > 0 and verdict == "retained_graph" and kept)
    bad |= not ok
    rows.append((job, e["bug"] or "-", e["expected_cause"], verdict, named, where, read, "yes" if ok else "NO"))
with open(os.path.join(folder, "corpus.md"), "w") as f:
    f.write(f"| job ({size}) | bug | expected | verdict | kept, named | forward's largest module type | "
            "samples / tokens read | right |\n")
    f.write("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
    for r in rows:
        f.write("| " + " | ".join(str(c) for c in r) + " |\n")
print(open(os.path.join(folder, "corpus.md")).read())
sys.exit(1 if bad else 0)
PY
if [ -n "${MEMDIAG_CORPUS_EXPECT:-}" ]; then
  # The committed table's own lines that start with "# " say how it was made.
  if ! diff -u <(grep -v '^# ' "$MEMDIAG_CORPUS_EXPECT") "$dir/corpus.md"; then
    say "corpus: $dir/corpus.md differs from $MEMDIAG_CORPUS_EXPECT (the README quotes it: refresh it from this run)"
    exit 1
  fi
fi
