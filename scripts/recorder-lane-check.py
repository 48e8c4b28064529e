#!/usr/bin/env python3
"""The recorder's steady lane against its Python on library jobs: each job of
the corpus (python/jobs/corpus.py) recorded for --steps steps (past the
lane's first step, 10) twice in fresh processes, with the lane and without
it (MEMDIAG_NATIVE_LANE=0), and the two reports compared: every sample's
allocator figures, sizes and census, and the comparer's verdict.

    python3 scripts/recorder-lane-check.py DIR [--size gpu] [--steps 16] [JOB ...]

Prints one row per job (samples compared, the largest difference in MiB,
the verdicts with and without the lane, how often the lane took over: it
hands back at anything unusual and takes over again at a steady step's end)
and exits 1 when a figure or a verdict differs. Timings (elapsed_ms) and the host's resident
memory differ between any two runs and are not compared.
"""
import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIGURES = ("allocated_mib", "reserved_mib", "peak_allocated_mib", "inactive_split_mib", "device_used_mib")
SAME = ("phase", "step", "tensors", "samples", "tokens")
BUILD = os.environ.get("MEMDIAG_BUILD_DIR", os.path.join(ROOT, "build"))


# corpus.py's main, with the times the lane took the recorder's state over
# counted (a job whose lane never engaged compares the Python with itself).
RUNNER = """
import sys
from memdiag import _lane
engaged = [0]
_engage = _lane.maybe_engage
def counted(rec):
    result = _engage(rec)
    engaged[0] += bool(rec._lane_on)
    return result
_lane.maybe_engage = counted
import corpus
rc = corpus.main(sys.argv[1:])
print(f"lane-check: the lane engaged {engaged[0]} times", flush=True)
sys.exit(rc)
"""


def record(job, size, steps, path, lane, log):
    """(exit code, times the lane engaged)."""
    env = dict(os.environ, MEMDIAG_NATIVE_LANE="1" if lane else "0",
               PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "python"), os.path.join(ROOT, "python", "jobs"),
                                           os.environ.get("PYTHONPATH", "")]))
    with open(log, "w") as out:
        rc = subprocess.run([sys.executable, "-c", RUNNER, "run", job, "--size", size, "--steps", str(steps), "-o",
                             path], env=env, stdout=out, stderr=subprocess.STDOUT).returncode
    engaged = 0
    for line in open(log):
        if line.startswith("lane-check: the lane engaged "):
            engaged = int(line.split()[4])
    return rc, engaged


def verdict(path):
    p = subprocess.run([os.path.join(BUILD, "bin", "compare_memory_reports"), path, "--format", "json"],
                       capture_output=True, text=True)
    try:
        return json.loads(p.stdout)["groups"][0]["dominant_cause"]
    except (ValueError, KeyError, IndexError):
        return f"exit {p.returncode}"


def differences(a, b):
    """(samples compared, largest MiB apart, first difference in words)."""
    sa, sb = a["samples"], b["samples"]
    if len(sa) != len(sb):
        return 0, float("inf"), f"{len(sa)} samples with the lane, {len(sb)} without"
    worst, first = 0.0, None
    for i, (x, y) in enumerate(zip(sa, sb)):
        for k in SAME:
            if x.get(k) != y.get(k) and first is None:
                first = f"sample {i} ({x.get('phase')}, step {x.get('step')}): {k} {x.get(k)} against {y.get(k)}"
        for k in FIGURES:
            u, v = x.get(k), y.get(k)
            if (u is None) != (v is None):
                first = first or f"sample {i}: {k} {u} against {v}"
            elif u is not None:
                worst = max(worst, abs(u - v))
    return len(sa), worst, first


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("jobs", nargs="*", help="corpus jobs (default: every job)")
    ap.add_argument("--size", choices=["cpu", "gpu"], default="gpu")
    ap.add_argument("--steps", type=int, default=16, help="steps a job records (the lane engages at step 10)")
    args = ap.parse_intermixed_args()
    if args.steps <= 11:
        ap.error("--steps must be above 11: the lane takes over at the end of step 10")
    sys.path.insert(0, os.path.join(ROOT, "python", "jobs"))
    import corpus
    jobs = args.jobs or sorted(corpus.JOBS)
    for j in jobs:
        if j not in corpus.JOBS:
            ap.error(f"unknown job '{j}' (allowed: {', '.join(sorted(corpus.JOBS))})")
    os.makedirs(args.dir, exist_ok=True)
    print(f"{'job':22s} {'samples':>7s} {'max MiB apart':>13s} {'lane':>15s} {'python':>15s} {'engaged':>8s}  "
          "first difference")
    bad = 0
    for j in jobs:
        paths, engaged = {}, {}
        for lane in (True, False):
            name = f"{j}-{'lane' if lane else 'python'}"
            paths[lane] = os.path.join(args.dir, name + ".json")
            rc, engaged[lane] = record(j, args.size, args.steps, paths[lane], lane,
                                       os.path.join(args.dir, name + ".log"))
            if rc not in (0, 1) or not os.path.exists(paths[lane]):  # 1: it ran out of memory, its report written
                paths[lane] = None
        if None in paths.values():
            print(f"{j:22s} failed: see {args.dir}/{j}-*.log")
            bad += 1
            continue
        a, b = (json.load(open(paths[k])) for k in (True, False))
        n, worst, first = differences(a, b)
        va, vb = verdict(paths[True]), verdict(paths[False])
        ok = first is None and worst < 0.0005 and va == vb and engaged[True] > 0 and engaged[False] == 0
        bad += not ok
        print(f"{j:22s} {n:7d} {worst:13.4f} {va:>15s} {vb:>15s} {engaged[True]:8d}  {first or '-'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
