#!/usr/bin/env python3
"""How many clock reads and host readings the Python recorder makes in a
steady step, counted (not timed): on a host where a clock read is dear (the
H200's: about 1.7 us a read, against 0.1 us on this project's machine) the
count is what the recorder's own timing costs a launch-bound step.

    python3 scripts/recorder-clock-reads.py [--steps 200] [--compare PATH]

Counts on a CPU loop of one Linear layer (the hooks' paths are the CUDA
path's: the recorder is told its probe is CUDA's, with readings that cost
nothing), steps 100 to --steps (past the walks and the modules' readings).
--compare PATH: another copy of the memdiag package (a directory named
memdiag_old holding it) counted the same way, side by side.
"""
import argparse
import importlib
import os
import sys
import tempfile

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))


class _Probe:  # the CUDA probe's calls, costing nothing
    native = None

    def figures(self, sync, process, device, reset_peak=False):
        return (1.0, 2.0, 3.0, 1.5, 0.0, None, 0)

    def begin_phase(self):
        pass

    def sync(self):
        pass


class _Losses:
    def add(self, loss):
        return 0


def count(pkg_name, steps):
    pkg = importlib.import_module(pkg_name)
    rec_mod = importlib.import_module(pkg_name + "._recorder")
    reads = [0]
    hosts = [0]
    ns, pc = rec_mod._ns, rec_mod._perf_counter

    def counted_ns():
        reads[0] += 1
        return ns()

    def counted_pc():
        reads[0] += 1
        return pc()

    torch.manual_seed(0)
    model = torch.nn.Linear(64, 8)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(16, 64), torch.randn(16, 8)
    rec = pkg.Recorder(model, opt, output=os.path.join(tempfile.mkdtemp(), "clock-reads.json"),
                       census=False, every=1, kept=False, modules=False)
    rec.start()
    rec._probe.stop()
    rec._cuda, rec._cpu = True, False
    rec._probe, rec._loss_buffer = _Probe(), _Losses()
    host_read = rec._host.read

    def counted_host(pinned):
        hosts[0] += 1
        return host_read(pinned)
    rec._host.read = counted_host
    rec_mod._ns, rec_mod._perf_counter = counted_ns, counted_pc
    try:
        for i in range(steps):
            if i == 100:
                reads[0] = hosts[0] = 0
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
    finally:
        rec_mod._ns, rec_mod._perf_counter = ns, pc
        rec._samples = []
        rec._finished = True
        rec._remove_hooks()
        rec_mod._active[0] = None
    n = steps - 100
    return reads[0] / n, hosts[0] / n


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--compare", help="a directory holding another copy of the package, named memdiag_old")
    args = ap.parse_args()
    rows = [("memdiag (this checkout)", "memdiag")]
    if args.compare:
        sys.path.insert(0, args.compare)
        rows.insert(0, ("memdiag_old (" + args.compare + ")", "memdiag_old"))
    print(f"# steady steps 100 to {args.steps}, census off, every step recorded; torch {torch.__version__}")
    print(f"{'recorder':40s} {'clock reads a step':>18s} {'host readings a step':>21s}")
    for label, name in rows:
        r, h = count(name, args.steps)
        print(f"{label:40s} {r:18.2f} {h:21.2f}")


if __name__ == "__main__":
    main()
