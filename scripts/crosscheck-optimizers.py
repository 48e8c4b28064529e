#!/usr/bin/env python3
"""memdiag's optimizer-state remedies against PyTorch's own optimizers.

    scripts/crosscheck-optimizers.py REPORT [REPORT...] [--device cpu]

Each REPORT is memory_diagnostics' run of a built-in MLP case (any device)
with no remedy, sgd, adafactor, state-bf16, state-8bit or offload-state.
This runs the same training in PyTorch's Python API, from the same seed
(the warm-up memory_diagnostics does, then the model and the data drawn in
its order), stepped by torch.optim: the case's Adam/AdamW (foreach=False),
or torch.optim.Adafactor (its defaults, foreach=False) for adafactor. It
prints each step's loss from both and their largest relative difference,
and exits 1 when adafactor or a remedy that does not change the training
(none, offload-state) differs by more than --tolerance (default 1e-5,
relative); for state-bf16 and state-8bit, which change it by design, it
prints the difference that the remedy model states.
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F

from memdiag_warmup import build_mlp, warm_up

EXACT = {"", "offload-state", "adafactor", "sgd"}


def python_losses(report, device):
    case, cfg = report["case"], report["config"]
    m, o = case["model"], case["optimizer"]
    remedies = cfg.get("remedies", [])
    torch.manual_seed(cfg["seed"])
    warm_up(device)
    model = build_mlp(m, device)
    params = list(model.parameters())
    if "adafactor" in remedies:
        opt = torch.optim.Adafactor(params, foreach=False)
    elif "sgd" in remedies or o["type"] == "sgd":
        opt = torch.optim.SGD(params, lr=o["lr"], momentum=0.0 if "sgd" in remedies else o.get("momentum", 0.0),
                              weight_decay=o["weight_decay"])
    else:
        kind = torch.optim.AdamW if o["type"] == "adamw" else torch.optim.Adam
        opt = kind(params, lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"], weight_decay=o["weight_decay"],
                   foreach=False)
    batch = cfg["batch_size_per_device"]
    losses = []
    for _ in range(cfg["steps"]):
        x = torch.randn(batch, m["input_dim"], device=device)
        y = torch.randint(0, m["output_dim"], (batch,), device=device)
        loss = F.cross_entropy(model(x).float(), y)
        loss.backward()
        losses.append(loss.item())
        opt.step()
        opt.zero_grad(set_to_none=True)
    return losses


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="+")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--tolerance", type=float, default=1e-5)
    a = ap.parse_args()
    failed = False
    for path in a.reports:
        r = json.load(open(path))
        remedy = "+".join(r["config"].get("remedies", []))
        ours = [s["loss"] for s in r["samples"] if s["phase"] == "step" and s.get("loss") is not None]
        theirs = python_losses(r, a.device)
        worst = max(abs(x - y) / max(abs(y), 1e-12) for x, y in zip(ours, theirs))
        exact = remedy in EXACT
        verdict = ("ok" if worst <= a.tolerance else "DIFFERS") if exact else "by design"
        print(f"{path}: {remedy or 'none'}: {len(ours)} steps, largest relative difference {worst:.3g} ({verdict})")
        for i, (x, y) in enumerate(zip(ours, theirs)):
            print(f"  step {i}: memdiag {x:.9g}  torch.optim {y:.9g}")
        failed |= exact and worst > a.tolerance
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
