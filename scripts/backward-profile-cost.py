#!/usr/bin/env python3
"""What reading step 1's backward node by node costs (record(profile_backward=)).

Records the same job with the profile on and off, alternating, and prints
step 1's backward time in each (the phase's elapsed_ms in the report, the
host's clock), the median of the differences, the nodes read and the cost
per node. Paid once a job, on that one backward.

  python3 scripts/backward-profile-cost.py [--device cpu|cuda] [--jobs mlp,resnet18,gpt2] [--rounds 5]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import memdiag  # noqa: E402


def build(job, device):
    torch.manual_seed(0)
    if job == "mlp":
        m = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048),
                                torch.nn.ReLU(), torch.nn.Linear(2048, 1024))
        batch = lambda b: (torch.randn(b, 1024, device=device), torch.randint(0, 1024, (b,), device=device))  # noqa: E731
        return m.to(device), 64, batch, lambda m, x, y: F.cross_entropy(m(x), y)
    if job == "resnet18":
        import torchvision
        m = torchvision.models.resnet18(num_classes=10)
        batch = lambda b: (torch.randn(b, 3, 64, 64, device=device), torch.randint(0, 10, (b,), device=device))  # noqa: E731
        return m.to(device), 16, batch, lambda m, x, y: F.cross_entropy(m(x), y)
    if job == "gpt2":
        import transformers as T
        m = T.GPT2LMHeadModel(T.GPT2Config(vocab_size=8000, n_positions=256, n_embd=256, n_layer=6, n_head=4))
        batch = lambda b: (torch.randint(0, 8000, (b, 128), device=device), None)  # noqa: E731
        return m.to(device), 8, batch, lambda m, x, y: m(input_ids=x, labels=x).loss
    raise SystemExit(f"unknown job {job!r} (allowed: mlp, resnet18, gpt2)")


def one(job, device, profile, out):
    model, b, batch, loss_of = build(job, device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    with memdiag.record(model, opt, output=out, profile_backward=profile, kept=False, modules=False, sync="phase"):
        for _ in range(3):
            x, y = batch(b)
            loss_of(model, x, y).backward()
            opt.step()
            opt.zero_grad()
    with open(out) as f:
        r = json.load(f)
    [bwd] = [s for s in r["samples"] if s["phase"] == "backward" and s["step"] == 1]
    bp = r["model"].get("backward_profile")
    return bwd["elapsed_ms"], len(bp["names"]) if bp else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--jobs", default="mlp,resnet18,gpt2")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    out = os.path.join(tempfile.mkdtemp(), "r.json")
    print(f"device {a.device}, torch {torch.__version__}, {a.rounds} rounds (profile on and off, alternating)")
    print(f"{'job':10s} {'off ms':>8s} {'on ms':>8s} {'diff ms':>8s} {'nodes':>6s} {'us/node':>8s}")
    for job in a.jobs.split(","):
        off, on, diffs, nodes = [], [], [], 0
        for _ in range(a.rounds):
            t_off, _ = one(job, a.device, False, out)
            t_on, nodes = one(job, a.device, True, out)
            off.append(t_off)
            on.append(t_on)
            diffs.append(t_on - t_off)
        d = statistics.median(diffs)
        print(f"{job:10s} {statistics.median(off):8.2f} {statistics.median(on):8.2f} {d:8.2f} {nodes:6d} "
              f"{1000 * d / max(nodes, 1):8.1f}")


if __name__ == "__main__":
    main()
