#!/usr/bin/env python3
"""Cross-check memdiag's remedies against the same workload written in Python.

    scripts/crosscheck-remedies.py REPORT_DIR [--tolerance MIB] [--device cuda]

For each report in REPORT_DIR made by memory_diagnostics from a built-in
case with remedies among checkpoint=N, accumulate=K and autocast-bf16 (or
none), runs that training in PyTorch's Python API - torch.utils.checkpoint's
checkpoint_sequential, a micro-batch loop, torch.autocast - reading
torch.cuda.memory_allocated() at the same phase boundaries, and prints the
largest difference per report. Exits 1 if any phase differs by more than the
tolerance (default 1 MiB) or a sample sequence differs.

Python's reentrant checkpoint gives the first segment's parameters no
gradient when the segment's input needs none (the trap memdiag's C++
checkpoint avoids by making the parameters inputs of its Function); the
non-reentrant kind keeps the same tensors (each checkpointed segment's input)
and computes every gradient, so it is the one compared against.
"""
import argparse
import json
import math
import os
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint_sequential

from memdiag_warmup import build_mlp, warm_up

MIB = 1024.0 * 1024.0


def parse_remedies(names):
    out = {}
    for r in names:
        name, _, value = r.partition("=")
        out[name] = int(value) if value else None
    return out


class Probe:
    def __init__(self, device):
        self.device = device
        self.samples = []

    def mark(self, phase, step=None, micro_batch=None):
        torch.cuda.synchronize(self.device)
        self.samples.append({"phase": phase, "step": step, "micro_batch": micro_batch,
                             "allocated_mib": torch.cuda.memory_allocated(self.device) / MIB})


def run(report, device):
    case = report["case"]
    cfg = report["config"]
    m = case["model"]
    remedies = parse_remedies(cfg.get("remedies", []))
    unsupported = set(remedies) - {"checkpoint", "accumulate", "autocast-bf16"}
    if unsupported or case["optimizer"]["type"] != "sgd" or m["dtype"] != "float32" or \
            case["graph"]["retain_graph"] or case["graph"]["keep_graph_connected_loss"]:
        return None
    torch.manual_seed(cfg["seed"])
    probe = Probe(device)
    # The warm-up memory_diagnostics does: cuBLAS workspaces for both threads.
    warm_up(device)

    model = build_mlp(m, device)
    probe.mark("model_ready")
    o = case["optimizer"]
    opt = torch.optim.SGD(model.parameters(), lr=o["lr"], momentum=o.get("momentum", 0.0),
                          weight_decay=o["weight_decay"])
    probe.mark("optimizer_ready")

    batch = cfg["batch_size_per_device"]
    k = remedies.get("accumulate") or 1
    segments = remedies.get("checkpoint")
    autocast = "autocast-bf16" in remedies
    base, extra = divmod(batch, k)
    losses = []
    for step in range(cfg["steps"]):
        x_all = torch.randn(batch, m["input_dim"], device=device)
        y_all = torch.randint(0, m["output_dim"], (batch,), device=device)
        step_loss = 0.0
        start = 0
        for mb in range(k):
            n = base + (1 if mb < extra else 0)
            xs, ys = (x_all.narrow(0, start, n), y_all.narrow(0, start, n)) if k > 1 else (x_all, y_all)
            start += n
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=autocast):
                if segments:
                    logits = checkpoint_sequential(model, segments, xs, use_reentrant=False)
                else:
                    logits = model(xs)
            loss = F.cross_entropy(logits.float(), ys)
            probe.mark("forward", step, mb if k > 1 else None)
            share = n / batch
            (loss * share if k > 1 else loss).backward()
            step_loss += loss.item() * share
            if k > 1:
                del xs, ys, logits, loss
            probe.mark("backward", step, mb if k > 1 else None)
        opt.step()
        probe.mark("step", step)
        losses.append(step_loss)
        opt.zero_grad(set_to_none=True)
        x_all = y_all = None
        if k == 1:
            del xs, ys, logits, loss
        probe.mark("cleanup", step)
    return probe.samples, losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports")
    ap.add_argument("--tolerance", type=float, default=1.0, help="MiB (default 1)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--single", help=argparse.SUPPRESS)
    args = ap.parse_args()
    device = torch.device(args.device)
    if args.single:
        # One report in this fresh process, as memory_diagnostics ran it.
        result = run(json.load(open(args.single)), device)
        print(json.dumps(None if result is None else {"samples": result[0], "losses": result[1]}))
        return 0
    bad = False
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(device)}")
    print(f"{'report':34s} {'samples':>7s} {'max |d alloc| MiB':>18s} {'max loss diff':>14s}")
    for name in sorted(f for f in os.listdir(args.reports) if f.endswith(".json")):
        path = os.path.join(args.reports, name)
        report = json.load(open(path))
        # Each in a fresh process: a workspace one run makes stays in its process.
        out = subprocess.run([sys.executable, os.path.abspath(__file__), args.reports, "--device", args.device,
                              "--single", path], check=True, capture_output=True, text=True).stdout
        parsed = json.loads(out.strip().splitlines()[-1])
        result = None if parsed is None else (parsed["samples"], parsed["losses"])
        if result is None:
            print(f"{name:34s} skipped (a remedy or case this script does not rebuild)")
            continue
        samples, losses = result
        ours = [s for s in report["samples"]]
        same = [(s["phase"], s["step"], s.get("micro_batch")) for s in ours] == \
               [(s["phase"], s["step"], s["micro_batch"]) for s in samples]
        worst = max(abs(a["allocated_mib"] - b["allocated_mib"]) for a, b in zip(ours, samples))
        mloss = [s["loss"] for s in ours if s["phase"] == "step" and "loss" in s]
        ldiff = max(abs(a - b) / abs(b) for a, b in zip(mloss, losses)) if mloss else float("nan")
        bad = bad or not same or worst > args.tolerance
        print(f"{name:34s} {('same' if same else 'DIFFER'):>7s} {worst:18.4f} {ldiff:14.2e}")
    print("every phase within %.1f MiB: %s" % (args.tolerance, "no" if bad else "yes"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
