#!/usr/bin/env python3
"""Where a recorded steady step's time goes: the steady lane's own parts,
and what its hooks cost the loop beside them.

    python3 scripts/recorder-lane-profile.py [--device cuda] [--cases beta,gamma] [--steps 2000]
                                             [--rounds 8] [--block 300]
    python3 scripts/recorder-lane-profile.py --made-up-readings --cases beta --steps 300 --rounds 0   # the CPU: parts alone

scripts/recorder-overhead-steady.py says how much a recorded launch-bound
step costs against the plain loop; its figures move by several percent
between runs, and the recorder's own clock (its hooks' bodies) explained
only part of them. This script splits the cost:

1. The lane's parts (MEMDIAG_LANE_PROFILE=1, native/steady_lane.cpp: Part):
   over --steps steady steps recorded at every step, each hook's body and
   the readings inside it, us a step and calls a step, with and without
   the census.
2. Blocks of --block steps in a random order each of --rounds rounds, the
   median of each mode's us a step and of the main thread's CPU time a
   step (time.thread_time: what the host spent, apart from the device's
   waits and the host's other tenants): plain; "no-op hooks" (the hooks
   the recorder installs, doing nothing); "lane unrecorded" (the recorder
   with its lane engaged at every=1000: its hooks run, no step is read:
   what the hooks' structure costs); "no census" and "recorded" (every
   step recorded). The differences between them are the parts' costs as
   the loop pays them, each against plain.
"""
import argparse
import importlib.util
import os
import random
import statistics
import sys
import tempfile
import time

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
os.environ["MEMDIAG_LANE_PROFILE"] = "1"
import memdiag  # noqa: E402
from memdiag import _lane  # noqa: E402


def _load(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "scripts", file))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_steady = _load("recorder_overhead_steady", "recorder-overhead-steady.py")
_overhead = _steady._overhead
MODES = ("plain", "no-op hooks", "lane unrecorded", "no census", "recorded")


def parts(model, opt, loop, device, steps, census, extra):
    """{part: (us a step, calls a step)} over `steps` steady steps."""
    path = os.path.join(tempfile.mkdtemp(), "r.json")
    with memdiag.record(model, opt, output=path, every=1, census=census, **extra) as rec:
        loop(30)
        _overhead.sync(device)
        if not rec._lane_on:
            raise SystemExit("the steady lane did not engage (no native module, or MEMDIAG_NATIVE_LANE=0)")
        before = _lane.profile(rec)
        host0, timed0 = rec._host_ns, rec._timed_later
        loop(steps)
        _overhead.sync(device)
        after = _lane.profile(rec)
        _lane.spill(rec)
        clock = (rec._host_ns - host0) / 1e3 / max(1, rec._timed_later - timed0)
    out = {}
    for k, (ns, calls) in after.items():
        ns0, calls0 = before.get(k, (0, 0))
        out[k] = ((ns - ns0) / 1e3 / steps, (calls - calls0) / steps)
    return out, clock


def block(mode, model, opt, loop, device, n, extra):
    """(us a step, main thread's CPU us a step) of `n` timed steps."""
    path = os.path.join(tempfile.mkdtemp(), "r.json")

    def timed():
        loop(10)
        _overhead.sync(device)
        w, c = time.perf_counter(), time.thread_time()
        loop(n)
        _overhead.sync(device)
        return (time.perf_counter() - w) * 1e6 / n, (time.thread_time() - c) * 1e6 / n
    if mode == "plain":
        return timed()
    if mode == "no-op hooks":
        with _steady.BareHooks(model, opt, device, False):
            return timed()
    every = 1000 if mode == "lane unrecorded" else 1
    with memdiag.record(model, opt, output=path, every=every, census=mode == "recorded", **extra) as rec:
        loop(30)
        result = timed()
        if not rec._lane_on:
            raise SystemExit(f"{mode}: the steady lane did not stay engaged")
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--cases", default="beta,gamma")
    ap.add_argument("--preset", default="small")
    ap.add_argument("--steps", type=int, default=2000, help="steady steps of the parts' recording (default 2000)")
    ap.add_argument("--rounds", type=int, default=8,
                    help="rounds of blocks, each mode once a round (default 8; 0: the parts alone)")
    ap.add_argument("--block", type=int, default=300, help="timed steps a block (default 300)")
    ap.add_argument("--seed", type=int, default=57)
    ap.add_argument("--made-up-readings", action="store_true",
                    help="on the CPU: the recorder's CUDA path with made-up readings (its host side alone)")
    args = ap.parse_args()
    extra = {}
    if args.made_up_readings:
        _steady.made_up_readings()
        extra = _steady.MADE_UP[0]
    device = torch.device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    print(f"torch {torch.__version__} on {name}; MEMDIAG_LANE_PROFILE=1", flush=True)
    rng = random.Random(args.seed)
    for case in args.cases.split(","):
        torch.manual_seed(0)
        model, opt, loop, label = _overhead.mlp_workload(case, device, args.preset)
        loop(20)
        print(f"\n{label}: the lane's parts over {args.steps} steady steps, every step recorded (us a step, calls a step)")
        rows = {}
        clocks = {}
        for census in (False, True):
            rows[census], clocks[census] = parts(model, opt, loop, device, args.steps, census, extra)
        names = sorted(set(rows[False]) | set(rows[True]), key=lambda k: (not k.startswith("hook"), k))
        print(f"  {'part':34} {'no census':>18} {'census':>18}")
        for k in names:
            cells = [rows[c].get(k) for c in (False, True)]
            print(f"  {k:34} " + " ".join(f"{c[0]:8.2f} us {c[1]:5.2f}x" if c else f"{'-':>18}" for c in cells))
        for c in (False, True):
            hooks = sum(v[0] for k, v in rows[c].items() if k.startswith("hook"))
            print(f"  {'census' if c else 'no census'}: the hooks' bodies {hooks:.2f} us a step; the recorder's own "
                  f"clock {clocks[c]:.2f} us a timed step")
        if args.rounds == 0:
            continue
        results = {m: [] for m in MODES}
        for mode in MODES:  # one of each first, untimed
            block(mode, model, opt, loop, device, 20, extra)
        for _ in range(args.rounds):
            order = list(MODES)
            rng.shuffle(order)
            for mode in order:
                results[mode].append(block(mode, model, opt, loop, device, args.block, extra))
        plain_w = statistics.median(r[0] for r in results["plain"])
        plain_c = statistics.median(r[1] for r in results["plain"])
        print(f"  blocks of {args.block} steps, {args.rounds} rounds in a random order (seed {args.seed}); medians")
        print(f"  {'mode':18} {'us/step':>9} {'vs plain':>9} {'cpu us/step':>12} {'vs plain':>9}")
        for mode in MODES:
            w = statistics.median(r[0] for r in results[mode])
            c = statistics.median(r[1] for r in results[mode])
            print(f"  {mode:18} {w:9.1f} {w - plain_w:+9.1f} {c:12.1f} {c - plain_c:+9.1f}")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
