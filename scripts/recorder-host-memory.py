#!/usr/bin/env python3
"""What the Python recorder holds in host memory on the CPU, over a long job:
the process's peak RSS for the same loop plain and recorded at the
defaults, each in a fresh process, at a few job lengths. The CPU probe
reads PyTorch's profiler, which keeps every event until it stops; the probe
restarts it in windows of about CpuProbe.WINDOW_EVENTS events, so the
recorder's memory is bounded by one window plus the report's samples
(which grow by one step in 100 after the first 100).

    python3 scripts/recorder-host-memory.py [--steps 1000,10000] [--width 256]

Prints, per length: plain and recorded peak RSS (MiB), their difference,
and the seconds each took. The bound the recorder is held to: the
difference stays within BOUND_MIB at every length.
"""
import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
BOUND_MIB = 128

JOB = r"""
import resource, sys, time
sys.path.insert(0, sys.argv[4])
import torch, torch.nn.functional as F
steps, width, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU(), torch.nn.Linear(width, width),
                            torch.nn.GELU(), torch.nn.Linear(width, 10))
opt = torch.optim.AdamW(model.parameters())

def loop():
    for _ in range(steps):
        loss = F.cross_entropy(model(torch.randn(32, width)), torch.randint(0, 10, (32,)))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

t = time.perf_counter()
if out == "-":
    loop()
else:
    import memdiag
    with memdiag.record(model, opt, output=out):
        loop()
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, time.perf_counter() - t)
"""


def run(steps, width, out):
    p = subprocess.run([sys.executable, "-c", JOB, str(steps), str(width), out, os.path.join(ROOT, "python")],
                       capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"recorder-host-memory: the job failed:\n{p.stderr}")
    rss, seconds = p.stdout.split()
    return float(rss), float(seconds)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", default="1000,10000", help="job lengths, comma separated (default 1000,10000)")
    ap.add_argument("--width", type=int, default=256, help="the MLP's width (default 256)")
    args = ap.parse_args()
    worst = 0.0
    print(f"{'steps':>7} {'plain MiB':>10} {'recorded MiB':>13} {'difference':>11} {'plain s':>8} {'recorded s':>11}")
    with tempfile.TemporaryDirectory() as d:
        for steps in (int(s) for s in args.steps.split(",")):
            plain, t_plain = run(steps, args.width, "-")
            rec, t_rec = run(steps, args.width, os.path.join(d, f"run-{steps}.json"))
            worst = max(worst, rec - plain)
            print(f"{steps:>7} {plain:>10.1f} {rec:>13.1f} {rec - plain:>+11.1f} {t_plain:>8.2f} {t_rec:>11.2f}")
    print(f"largest difference {worst:+.1f} MiB (bound {BOUND_MIB} MiB): {'within' if worst <= BOUND_MIB else 'OVER'}")
    return 0 if worst <= BOUND_MIB else 1


if __name__ == "__main__":
    sys.exit(main())
