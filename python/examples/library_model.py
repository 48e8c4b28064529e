#!/usr/bin/env python3
"""A model memdiag did not write, trained for a few steps with the recorder:
torchvision's ResNet-50 or Hugging Face transformers' GPT-2 (built from its
configuration with random weights: nothing is downloaded).

    python3 python/examples/library_model.py resnet50 --batch-size 64 -o resnet50.json
    python3 python/examples/library_model.py gpt2 --batch-size 8 --sequence-length 1024 -o gpt2.json
    compare_memory_reports resnet50.json

--memory-limit-mib caps the process's share of the GPU
(torch.cuda.set_per_process_memory_fraction), to see how the job fails: the
recorder writes the report, with the allocator's state at the failure, before
the out-of-memory error ends the script.
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import memdiag  # noqa: E402


def resnet50(args, device):
    import torchvision
    model = torchvision.models.resnet50(weights=None).to(device)

    def batch():
        x = torch.randn(args.batch_size, 3, args.image_size, args.image_size, device=device)
        y = torch.randint(0, 1000, (args.batch_size,), device=device)
        return x, y

    def loss_of(x, y):
        return F.cross_entropy(model(x), y)

    return model, batch, loss_of


def gpt2(args, device):
    import transformers
    config = transformers.GPT2Config(n_positions=max(1024, args.sequence_length))
    model = transformers.GPT2LMHeadModel(config).to(device)

    def batch():
        ids = torch.randint(0, config.vocab_size, (args.batch_size, args.sequence_length), device=device)
        return ids, ids

    def loss_of(ids, labels):
        return model(input_ids=ids, labels=labels).loss

    return model, batch, loss_of


MODELS = {"resnet50": resnet50, "gpt2": gpt2}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--image-size", type=int, default=224, help="resnet50: pixels per side")
    ap.add_argument("--sequence-length", type=int, default=512, help="gpt2: tokens per sample")
    ap.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--memory-limit-mib", type=float, default=None)
    ap.add_argument("--variant", default=None)
    ap.add_argument("--no-census", action="store_true")
    ap.add_argument("--no-record", action="store_true", help="the same loop without the recorder (for timing)")
    ap.add_argument("--snapshot", default=None, help="the allocator's history at an out-of-memory error (memory_viz)")
    ap.add_argument("-o", "--output", default=None)
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if args.memory_limit_mib and device.type == "cuda":
        device = memdiag.limit_memory(args.memory_limit_mib, device)
    torch.manual_seed(0)
    model, batch, loss_of = MODELS[args.model](args, device)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4) if args.optimizer == "adamw" else \
        torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)

    def loop():
        for _ in range(args.steps):
            x, y = batch()
            loss = loss_of(x, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            del x, y, loss

    if args.no_record:
        loop()
        return 0
    output = args.output or f"{args.model}.json"
    with memdiag.record(model, opt, output=output, name=args.model, batch_size=args.batch_size, steps=args.steps,
                        preset=f"seq{args.sequence_length}" if args.model == "gpt2" else f"px{args.image_size}",
                        variant=args.variant, census=not args.no_census, snapshot=args.snapshot):
        loop()
    print(f"wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
