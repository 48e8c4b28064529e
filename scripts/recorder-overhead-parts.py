#!/usr/bin/env python3
"""The Python recorder's steady step, part by part: where its host time goes.

    python3 scripts/recorder-overhead-parts.py [--device cuda] [--steps 300] [--rounds 5] [CASE ...]

scripts/recorder-overhead.py measures what recording costs a loop; this says
which of the recorder's parts costs it. On memdiag's MLP cases (default
beta gamma alpha, preset small), in one process: rounds of the same loop
plain, with no-op hooks of the kinds the recorder installs (a forward
pre-hook with keywords, a forward hook that always runs, the optimizer's
step pre- and post-hooks, torch.autograd.backward wrapped: the floor of
being hooked at all), and recorded with every step recorded, with and
without the census. Each of the recorder's methods is timed in place
(perf_counter_ns around it, about 0.2 us each), and printed as us per
steady step (steps 5 on) with how many calls a step makes; nested parts are
inside their callers' figures (_close holds the readings, the census and
the host's reading; _after_backward holds the loss's copy and the
backward phase's _close; _after_zero_grad the cleanup's _close).

The times are the host's: in a loop bound by launches they are what the
loop pays; the percentages beside them move with the machine (the H200's
host ran the same plain loop 2.35 and 2.91 ms a step on two days).
"""
import argparse
import collections
import functools
import os
import statistics
import sys
import tempfile
import time

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import memdiag  # noqa: E402
from memdiag import _inputs, _losses, _probe, _recorder  # noqa: E402
_recorder._TIMED_EVERY = 1  # its clock read at every step, as this script reads it

overhead = __import__("recorder-overhead")
spent, calls = collections.Counter(), collections.Counter()


def timed_in_place(owner, name, label):
    f = getattr(owner, name)

    @functools.wraps(f)
    def wrapped(*a, **k):
        t = time.perf_counter_ns()
        try:
            return f(*a, **k)
        finally:
            spent[label] += time.perf_counter_ns() - t
            calls[label] += 1
    setattr(owner, name, wrapped)


def install():
    for name in ("_close", "_take_census", "_forward_pre", "_forward_post", "_before_backward", "_after_backward",
                 "_step_pre", "_step_post", "_after_zero_grad", "_count_forward", "_begin_phase"):
        timed_in_place(_recorder.Recorder, name, f"Recorder.{name}")
    timed_in_place(_probe.HostReader, "read", "HostReader.read")
    timed_in_place(_losses.LossBuffer, "add", "LossBuffer.add")
    for cls in (_probe.CudaProbe, _probe.CpuProbe):
        for name in ("figures", "mark"):
            if hasattr(cls, name):
                timed_in_place(cls, name, f"{cls.__name__}.{name}")
    timed_in_place(_inputs, "sizes", "inputs.sizes")


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", nargs="*", default=["beta", "gamma", "alpha"])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    device = torch.device(args.device)
    install()
    first = overhead.FIRST
    for name in args.cases:
        torch.manual_seed(0)
        model, opt, loop, label = overhead.mlp_workload(name, device, "small")
        loop(first)
        out = tempfile.mkdtemp()

        def plain():
            sync(device)
            t = time.perf_counter()
            loop(args.steps)
            sync(device)
            return (time.perf_counter() - t) * 1e6 / args.steps

        def hooked():
            handles = [model.register_forward_pre_hook(lambda m, a, k: None, with_kwargs=True),
                       model.register_forward_hook(lambda m, a, o: None, always_call=True),
                       opt.register_step_pre_hook(lambda o, a, k: None),
                       opt.register_step_post_hook(lambda o, a, k: None)]
            original = torch.autograd.backward
            torch.autograd.backward = lambda *a, **k: original(*a, **k)
            try:
                return plain()
            finally:
                torch.autograd.backward = original
                for h in handles:
                    h.remove()

        for census in (True, False):
            us = {"plain": [], "no-op hooks": [], "recorded": []}
            host = []
            for _ in range(args.rounds):
                us["plain"].append(plain())
                us["no-op hooks"].append(hooked())
                with memdiag.record(model, opt, output=os.path.join(out, "r.json"), census=census, every=1) as rec:
                    loop(first)
                    sync(device)
                    spent.clear()
                    calls.clear()
                    h = rec._host_ns
                    us["recorded"].append(plain())
                    host.append((rec._host_ns - h) / 1e3 / args.steps)
            m = {k: statistics.median(v) for k, v in us.items()}
            print(f"{label}, census={census}: us a step: plain {m['plain']:.0f}, no-op hooks {m['no-op hooks']:.0f} "
                  f"({m['no-op hooks'] - m['plain']:+.0f}), recorded {m['recorded']:.0f} "
                  f"({m['recorded'] - m['plain']:+.0f}, {100 * (m['recorded'] / m['plain'] - 1):+.1f}%); "
                  f"the recorder's own clock {statistics.median(host):.0f}")
            print("   parts, the last round, us a step (calls a step): " + ", ".join(
                f"{k} {spent[k] / 1e3 / args.steps:.1f} ({calls[k] // args.steps}x)"
                for k in sorted(spent, key=lambda k: -spent[k])), flush=True)


if __name__ == "__main__":
    sys.exit(main())
