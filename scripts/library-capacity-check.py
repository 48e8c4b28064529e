#!/usr/bin/env python3
"""One recorded run's capacity answer on a library job, against the largest
batch that really completes under the budget.

    python3 scripts/library-capacity-check.py DIR JOB:BUDGET[,BUDGET...] ... [--steps 3] [--size gpu]
    python3 scripts/library-capacity-check.py /tmp/lc resnet-clean:6000 vit-clean:6000 bert-clean:6000,9000

scripts/capacity-check.sh asks this of memory_diagnostics' cases, whose
--find-max-batch proves its answer. Users' jobs are recorded by the Python
recorder, and nothing here wrote their models: this script searches a job
of the corpus (python/jobs/corpus.py, with --batch) the same way. For each
job and budget: the largest batch B that completes `--steps` steps under
memdiag.limit_memory(BUDGET) while B + 1 runs out (each try a child forked
from this process once torch, torchvision and transformers are imported,
so each has its own CUDA context and its own limit); then one recorded run
at a quarter of B with room to spare, and compare_memory_reports
--budget-mib BUDGET on its report: the predicted batch and the range its
caveats give (batch_if_all_grows to batch_if_activations_grow; the low end
open where caveats.low_end_unknown says why). Prints a table (also
DIR/library-capacity.txt); the reports stay in DIR.

Needs CUDA (a limit means nothing on the CPU) and build/bin/compare_memory_reports
(scripts/build.sh), or MEMDIAG_BUILD_DIR.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "python", "jobs"))

MAX_BATCH = 1 << 14  # a search that still fits here stops and says so


def try_batch(corpus, job, size, batch, steps, budget, folder, log):
    """'fits' or 'oom' for `batch` under `budget` MiB, in a forked child."""
    out = os.path.join(folder, f"{job}-{budget}-try{batch}.json")
    # 1 is the job's out of memory (its report written); 3: the try raised.
    rc = corpus.in_child(log, True, lambda: corpus.run(job, size, out, steps, memory_limit_mib=budget, batch=batch),
                         raised=3)
    if rc not in (0, 1):
        raise SystemExit(f"{job} at batch {batch} under {budget} MiB: exit {rc} (see {log})")
    return "fits" if rc == 0 else "oom"


def search(tryit, start):
    """The largest batch that fits and the tries, from `start`: doubling or
    halving to a bracket, then bisecting inside it. None where batch 1
    runs out."""
    tries = []

    def t(b):
        r = tryit(b)
        tries.append((b, r))
        return r == "fits"
    lo, hi = None, None  # lo fits, hi runs out
    b = max(1, start)
    if t(b):
        lo = b
        while hi is None:
            b = lo * 2
            if b > MAX_BATCH:
                return lo, tries, False
            if t(b):
                lo = b
            else:
                hi = b
    else:
        hi = b
        while lo is None:
            if hi == 1:
                return None, tries, True
            b = hi // 2
            if t(b):
                lo = b
            else:
                hi = b
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if t(mid):
            lo = mid
        else:
            hi = mid
    return lo, tries, True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("specs", nargs="+", metavar="JOB:BUDGET[,BUDGET...]")
    ap.add_argument("--steps", type=int, default=3, help="steps of every run (default 3)")
    ap.add_argument("--size", choices=["cpu", "gpu"], default="gpu", help="the corpus's size family (default gpu)")
    args = ap.parse_args()
    # torch.cuda.is_available() asks CUDA for its devices and so poisons
    # every fork after it (a forked try then fails "Cannot re-initialize
    # CUDA in forked subprocess"), unless asked to check through NVML.
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    import torch
    import corpus
    if not torch.cuda.is_available():
        raise SystemExit("library-capacity-check: needs CUDA (a memory limit means nothing on the CPU)")
    compare = os.path.join(os.environ.get("MEMDIAG_BUILD_DIR", os.path.join(ROOT, "build")), "bin",
                           "compare_memory_reports")
    if not os.access(compare, os.X_OK):
        raise SystemExit(f"library-capacity-check: no {compare}: run scripts/build.sh first")
    jobs = []
    for spec in args.specs:
        job, _, budgets = spec.partition(":")
        if job not in corpus.JOBS:
            raise SystemExit(f"library-capacity-check: unknown job '{job}' (python/jobs/corpus.py list)")
        try:
            jobs += [(job, int(b)) for b in budgets.split(",")]
        except ValueError:
            raise SystemExit(f"library-capacity-check: '{spec}': budgets are whole MiB (JOB:6000,9000)")
    # What a fresh process would import, once: each try forks from here
    # before CUDA starts (the NVML-based check above does not start it).
    import torchvision  # noqa: F401
    import transformers
    for name in ("BertConfig", "BertForMaskedLM", "GPT2Config", "GPT2LMHeadModel"):
        getattr(transformers, name)
    os.makedirs(args.dir, exist_ok=True)
    table = open(os.path.join(args.dir, "library-capacity.txt"), "w")

    def emit(line):
        print(line, flush=True)
        table.write(line + "\n")
        table.flush()
    emit(f"# python3 scripts/library-capacity-check.py DIR {' '.join(args.specs)} --steps {args.steps} --size {args.size}")
    # The device's name from nvidia-smi: torch.cuda.get_device_name()
    # would start CUDA here, and a child forked after that cannot use it.
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader", "-i", "0"],
                             capture_output=True, text=True, timeout=30).stdout.strip() or "a CUDA device"
    except (OSError, subprocess.SubprocessError):
        gpu = "a CUDA device"
    emit(f"# torch {torch.__version__} on {gpu}")
    emit(f"{'job':22} {'budget':>7} {'found':>6} {'tries':>5} {'search_s':>8} {'one_b':>6} {'one_run':>7} "
         f"{'apart':>8} {'low':>6} {'high':>6} {'low end':16} in range")
    for job, budget in jobs:
        log = os.path.join(args.dir, f"{job}-{budget}.log")
        family = corpus.JOBS[job][0]
        s = corpus.SIZES[family][args.size]
        start = s.get("batch", s.get("micro"))
        if start is None:
            emit(f"{job:22} {budget:>7} (sets its batch from a token budget: no --batch)")
            continue
        t0 = time.time()
        found, tries, bounded = search(
            lambda b: try_batch(corpus, job, args.size, b, args.steps, budget, args.dir, log), start)
        secs = time.time() - t0
        if found is None:
            emit(f"{job:22} {budget:>7} batch 1 runs out")
            continue
        q = max(1, found // 4)
        one = os.path.join(args.dir, f"{job}-{budget}-q{q}.json")
        rc = subprocess.run([sys.executable, os.path.join(ROOT, "python", "jobs", "corpus.py"), "run", job,
                             "--size", args.size, "--steps", str(args.steps), "--batch", str(q), "-o", one],
                            stdout=subprocess.DEVNULL, stderr=open(log, "a")).returncode
        if rc != 0:
            raise SystemExit(f"{job} at batch {q} with no limit: exit {rc} (see {log})")
        cmp = subprocess.run([compare, one, "--budget-mib", str(budget), "--format", "json"],
                             capture_output=True, text=True)
        with open(one[:-5] + ".cmp.json", "w") as f:
            f.write(cmp.stdout)
        cap = json.loads(cmp.stdout)["groups"][0]["capacity"][0]
        cv = cap.get("caveats") or {}
        p = cap.get("max_batch")
        lo, hi, why = cv.get("batch_if_all_grows"), cv.get("batch_if_activations_grow"), cv.get("low_end_unknown")
        inside = "-" if hi is None else "yes" if (lo is None or lo <= found) and found <= hi else "NO"
        apart = "-" if p is None else f"{100.0 * (p - found) / found:+.2f}%"
        emit(f"{job:22} {budget:>7} {str(found) + ('' if bounded else '+'):>6} {len(tries):>5} {secs:8.1f} {q:>6} "
             f"{p if p is not None else '-':>7} {apart:>8} {lo if lo is not None else 'open':>6} "
             f"{hi if hi is not None else '-':>6} {why or 'known':16} {inside}")
        emit(f"#   tries: {' '.join(f'{b}:{r}' for b, r in tries)}")
    table.close()


if __name__ == "__main__":
    main()
