#!/usr/bin/env python3
"""A plain PyTorch training loop, recorded with memdiag.record: memdiag's MLP
cases (cases/alpha.json, beta.json, gamma.json, or a case file of your own)
written the way a Python user writes them.

    python3 python/examples/mlp_job.py cases/beta.json -o beta-py.json
    compare_memory_reports beta-py.json

The model, data and optimizer follow the case file as memory_diagnostics
builds them (torch.nn.Linear layers with the case's activation, random
inputs and class labels, cross-entropy), so the two can be compared phase by
phase. Nothing in the loop below is there for the recorder: the `del` at the
end of a step is what a memory-careful loop does anyway (memory_diagnostics'
cleanup drops the step's tensors the same way), and the retained graphs of
gamma are the case's own defect, written as Python users write it.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint_sequential

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import memdiag  # noqa: E402

ACTIVATIONS = {"relu": torch.nn.ReLU, "gelu": torch.nn.GELU, "tanh": torch.nn.Tanh}


def build(case, preset):
    m = case["presets"][preset]["model"]
    layers, width = [], m["input_dim"]
    for _ in range(m["depth"]):
        layers += [torch.nn.Linear(width, m["hidden_dim"]), ACTIVATIONS[m.get("activation", "relu")]()]
        width = m["hidden_dim"]
    layers.append(torch.nn.Linear(width, m["output_dim"]))
    return torch.nn.Sequential(*layers), m


def optimizer_for(case, model):
    o = case["optimizer"]
    kind = o["type"]
    # foreach=False: one parameter at a time, as LibTorch's optimizers update.
    if kind == "sgd":
        return torch.optim.SGD(model.parameters(), lr=o["lr"], momentum=o.get("momentum", 0.0),
                               weight_decay=o.get("weight_decay", 0.0), foreach=False)
    betas = (o.get("beta1", 0.9), o.get("beta2", 0.999))
    cls = torch.optim.AdamW if kind == "adamw" else torch.optim.Adam
    default_decay = 0.01 if kind == "adamw" else 0.0
    return cls(model.parameters(), lr=o["lr"], betas=betas, eps=o.get("eps", 1e-8),
               weight_decay=o.get("weight_decay", default_decay), foreach=False)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", help="an MLP case file (cases/alpha.json ...)")
    ap.add_argument("--preset", default=None, help="default: the case's default_preset")
    ap.add_argument("--batch-size", type=int, default=None, help="default: the preset's")
    ap.add_argument("--steps", type=int, default=None, help="default: the preset's")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--checkpoint", type=int, default=0, metavar="SEGMENTS",
                    help="activation checkpointing over this many segments (torch.utils.checkpoint)")
    ap.add_argument("--accumulate", type=int, default=1, metavar="K", help="gradient accumulation over K micro-batches")
    ap.add_argument("--bf16", action="store_true",
                    help="weights, gradients, optimizer state and inputs in bfloat16, the loss in fp32 (memory_diagnostics' bf16)")
    ap.add_argument("--autocast-bf16", action="store_true",
                    help="the forward under torch.autocast(bfloat16), the loss in fp32 (memory_diagnostics' autocast-bf16)")
    ap.add_argument("--memory-limit-mib", type=float, default=None,
                    help="CUDA: torch.cuda.set_per_process_memory_fraction for this budget")
    ap.add_argument("--variant", default=None, help="a label for a change measured against the run without one")
    ap.add_argument("--no-census", action="store_true", help="record without the tensor census")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args(argv)

    case = json.load(open(args.case))
    preset = args.preset or case.get("default_preset") or sorted(case["presets"])[0]
    p = case["presets"][preset]
    batch = args.batch_size or p["batch_size"]
    steps = args.steps or p["steps"]
    graph = case.get("graph", {})
    device = torch.device(args.device)
    if args.memory_limit_mib and device.type == "cuda":
        device = memdiag.limit_memory(args.memory_limit_mib, device)

    torch.manual_seed(args.seed)
    # memory_diagnostics' order: seed, warm-up, model, data. Only for the
    # weights and data to be the same as its run of this case; recording
    # needs none of it.
    memdiag.warm_up(device)
    model, m = build(case, preset)
    dtype = torch.bfloat16 if args.bf16 else torch.float32
    model.to(device, dtype)
    opt = optimizer_for(case, model)
    kept = []  # gamma's defect: graph-connected losses kept across steps
    changes = ([f"checkpoint={args.checkpoint}"] if args.checkpoint else []) + \
              ([f"accumulate={args.accumulate}"] if args.accumulate > 1 else []) + \
              (["autocast-bf16"] if args.autocast_bf16 else []) + (["bf16"] if args.bf16 else [])
    variant = args.variant or ("+".join(changes) if changes else None)

    with memdiag.record(model, opt, output=args.output, name=case["name"], preset=preset, batch_size=batch,
                        steps=steps, seed=args.seed, variant=variant, census=not args.no_census,
                        description=case.get("description", "")):
        for step in range(steps):
            x = torch.randn(batch, m["input_dim"], device=device, dtype=dtype)
            y = torch.randint(0, m["output_dim"], (batch,), device=device)
            for xs, ys in zip(x.chunk(args.accumulate), y.chunk(args.accumulate)):
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.autocast_bf16):
                    logits = checkpoint_sequential(model, args.checkpoint, xs, use_reentrant=False) \
                        if args.checkpoint else model(xs)
                loss = F.cross_entropy(logits.float(), ys) * (xs.size(0) / batch)
                loss.backward(retain_graph=graph.get("retain_graph", False))
                if graph.get("keep_graph_connected_loss", False):
                    kept.append(loss)
            opt.step()
            del x, y, xs, ys, logits, loss
            opt.zero_grad(set_to_none=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
