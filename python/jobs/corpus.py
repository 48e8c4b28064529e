#!/usr/bin/env python3
"""A corpus of real training jobs on library models (torchvision, Hugging Face
transformers), each recorded with memdiag; expected.json says, for each, the
memory cause its design implies.

    python python/jobs/corpus.py list
    python python/jobs/corpus.py run bert-kept-logits --size cpu -o /tmp/corpus/bert-kept-logits.json
    python python/jobs/corpus.py run-all --size cpu --dir /tmp/corpus   # each job in a forked child

Models are built from configurations with random weights and fed random
tensors: nothing is downloaded. --size cpu keeps every job to seconds on two
CPU cores; --size gpu uses realistic sizes for one H200.
"""
import argparse
import os
import random
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import memdiag  # noqa: E402

# Shapes per model family and size. expected.json's numbers are computed from these.
SIZES = {
    "resnet": {"cpu": dict(arch="resnet18", image=112, batch=32),
               "gpu": dict(arch="resnet50", image=224, batch=64)},
    "resnet-retain": {"cpu": dict(arch="resnet18", image=112, batch=16),  # halved: it keeps ~6 steps of graphs
                      "gpu": dict(arch="resnet50", image=224, batch=64)},
    "resnet-big": {"cpu": dict(arch="resnet18", image=96, batch=48),
                   "gpu": dict(arch="resnet50", image=224, batch=256, memory_limit_mib=16384)},
    "resnet-wide": {"cpu": dict(arch="resnet18", image=112, batch=8, head=4096),
                    "gpu": dict(arch="resnet50", image=224, batch=8, head=16384)},
    "vit": {"cpu": dict(image=64, patch=8, layers=6, heads=6, hidden=192, mlp=768, classes=100, batch=32),
            "gpu": dict(image=224, patch=16, layers=12, heads=12, hidden=768, mlp=3072, classes=1000, batch=64)},
    "vit-frozen": {"cpu": dict(image=32, patch=4, layers=6, heads=8, hidden=512, mlp=2048, classes=100, batch=8),
                   "gpu": dict(image=224, patch=16, layers=12, heads=12, hidden=768, mlp=3072, classes=1000, batch=8)},
    "bert": {"cpu": dict(vocab=8192, hidden=256, layers=4, heads=4, batch=8, seq=128),
             "gpu": dict(vocab=30522, hidden=768, layers=12, heads=12, batch=16, seq=128)},
    "bert-amp": {"cpu": dict(vocab=8192, hidden=256, layers=4, heads=4, batch=16, seq=128),
                 "gpu": dict(vocab=30522, hidden=768, layers=12, heads=12, batch=32, seq=128)},
    "gpt2": {"cpu": dict(vocab=8192, hidden=128, layers=4, heads=4, positions=256, batch=8, seq=256),
             "gpu": dict(vocab=50257, hidden=768, layers=12, heads=12, positions=1024, batch=8, seq=1024)},
    # Gradient accumulation: `micro` samples per forward, ACCUM_STEPS forwards per optimizer step.
    "gpt2-accum": {"cpu": dict(vocab=8192, hidden=128, layers=4, heads=4, positions=256, micro=2, seq=256),
                   "gpu": dict(vocab=50257, hidden=768, layers=12, heads=12, positions=1024, micro=2, seq=1024)},
    # Dynamic batching: `budget` tokens per step, length drawn from `lengths`, batch = budget // length.
    "gpt2-dyn": {"cpu": dict(vocab=8192, hidden=128, layers=4, heads=4, positions=256, budget=2048,
                             lengths=list(range(32, 257, 32))),
                 "gpu": dict(vocab=50257, hidden=768, layers=12, heads=12, positions=1024, budget=8192,
                             lengths=list(range(128, 1025, 128)))},
}
ACCUM_STEPS = 4


# ---- models: each builder returns (model, optimizer, batch(step) -> inputs, forward(model, inputs) -> (loss, logits))

def _vision_data(s, device, classes):
    def batch(step):
        return (torch.randn(s["batch"], 3, s["image"], s["image"], device=device),
                torch.randint(0, classes, (s["batch"],), device=device))

    def forward(model, inputs):
        x, y = inputs
        logits = model(x)
        return F.cross_entropy(logits, y), logits
    return batch, forward


def resnet(s, device):
    import torchvision
    model = getattr(torchvision.models, s["arch"])(weights=None)
    if "head" in s:  # a wide MLP classifier on the backbone: most parameters are in it
        w = s["head"]
        model.fc = nn.Sequential(nn.Linear(model.fc.in_features, w), nn.ReLU(inplace=True),
                                 nn.Linear(w, w), nn.ReLU(inplace=True), nn.Linear(w, 1000))
    model = model.to(device)
    # torchvision's reference recipe for ResNet is SGD with momentum; the wide head's job is about AdamW.
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4) if "head" in s else \
        torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    return (model, opt) + _vision_data(s, device, 1000)


def vit(s, device, frozen=False):
    import torchvision
    model = torchvision.models.VisionTransformer(
        image_size=s["image"], patch_size=s["patch"], num_layers=s["layers"], num_heads=s["heads"],
        hidden_dim=s["hidden"], mlp_dim=s["mlp"], num_classes=s["classes"]).to(device)
    if frozen:  # fine-tune only the last encoder block, the final norm and the head
        last = f"encoder.layers.encoder_layer_{s['layers'] - 1}."
        for name, p in model.named_parameters():
            p.requires_grad_(name.startswith((last, "encoder.ln.", "heads.")))
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    return (model, opt) + _vision_data(s, device, s["classes"])


def _hf_forward(model, inputs):
    out = model(**inputs)
    return out.loss, out.logits


def _token_batch(vocab, batch, seq, device):
    ids = torch.randint(0, vocab, (batch, seq), device=device)
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}


def bert(s, device):
    import transformers
    config = transformers.BertConfig(vocab_size=s["vocab"], hidden_size=s["hidden"], num_hidden_layers=s["layers"],
                                     num_attention_heads=s["heads"], intermediate_size=4 * s["hidden"],
                                     max_position_embeddings=max(512, s["seq"]))
    model = transformers.BertForMaskedLM(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    return model, opt, lambda step: _token_batch(s["vocab"], s["batch"], s["seq"], device), _hf_forward


def gpt2(s, device, order=None):
    import transformers
    config = transformers.GPT2Config(vocab_size=s["vocab"], n_positions=s["positions"], n_embd=s["hidden"],
                                     n_layer=s["layers"], n_head=s["heads"],
                                     bos_token_id=s["vocab"] - 1, eos_token_id=s["vocab"] - 1)
    model = transformers.GPT2LMHeadModel(config).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if order is None:
        size = s.get("micro", s.get("batch"))
        return model, opt, lambda step: _token_batch(s["vocab"], size, s["seq"], device), _hf_forward
    # Dynamic batching: one seeded draw of lengths, used as drawn (random bucket order)
    # or sorted (ascending lengths, as a length-sorted sampler gives).
    rng = random.Random(0)
    draws = [rng.choice(s["lengths"]) for _ in range(s["steps"])]
    if order == "ascending":
        draws.sort()

    def batch(step):
        length = draws[step]
        return _token_batch(s["vocab"], s["budget"] // length, length, device)
    return model, opt, batch, _hf_forward


# ---- training loops: the clean one, and one per bug

def clean(model, opt, batch, forward, steps):
    for step in range(steps):
        loss, _ = forward(model, batch(step))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def kept_logits(model, opt, batch, forward, steps):
    all_logits = []  # "for metrics at the end of the epoch": kept with their graph, never detached
    for step in range(steps):
        loss, logits = forward(model, batch(step))
        all_logits.append(logits)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return all_logits


def loss_sum(model, opt, batch, forward, steps):
    total_loss = 0.0
    for step in range(steps):
        loss, _ = forward(model, batch(step))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        total_loss += loss  # bug: a tensor in the graph, not loss.item()
    print(f"mean loss {total_loss.item() / steps:.4f}")


def retain_graph(model, opt, batch, forward, steps):
    history = []  # the losses, for a smoothed loss in the log: holds every step's graph
    for step in range(steps):
        loss, _ = forward(model, batch(step))
        loss.backward(retain_graph=True)  # bug: keeps the graph's saved tensors after backward
        history.append(loss)
        opt.step()
        opt.zero_grad(set_to_none=True)
    print(f"smoothed loss {torch.stack(history[-10:]).mean().item():.4f}")


def accumulate(model, opt, batch, forward, steps):
    for step in range(steps):
        for micro in range(ACCUM_STEPS):
            loss, _ = forward(model, batch(step * ACCUM_STEPS + micro))
            (loss / ACCUM_STEPS).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def amp(model, opt, batch, forward, steps):
    # CUDA: fp16 autocast with a GradScaler. CPU: bf16 autocast without one (bf16 has fp32's
    # exponent range, so gradients do not underflow and loss scaling is not needed).
    device = next(model.parameters()).device
    cuda = device.type == "cuda"
    scaler = torch.amp.GradScaler("cuda") if cuda else None
    for step in range(steps):
        with torch.autocast(device.type, dtype=torch.float16 if cuda else torch.bfloat16):
            loss, _ = forward(model, batch(step))
        if scaler:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()
        opt.zero_grad(set_to_none=True)


# job name -> (size family, builder, loop, bug)
JOBS = {
    "resnet-clean": ("resnet", resnet, clean, None),
    "vit-clean": ("vit", vit, clean, None),
    "bert-clean": ("bert", bert, clean, None),
    "gpt2-clean": ("gpt2", gpt2, clean, None),
    "gpt2-dyn-random": ("gpt2-dyn", lambda s, d: gpt2(s, d, order="random"), clean, None),
    "gpt2-dyn-ascending": ("gpt2-dyn", lambda s, d: gpt2(s, d, order="ascending"), clean, None),
    "bert-kept-logits": ("bert", bert, kept_logits, "logits kept in a list every step"),
    "gpt2-loss-sum": ("gpt2", gpt2, loss_sum, "graph-connected running loss sum"),
    "resnet-retain-graph": ("resnet-retain", resnet, retain_graph, "backward(retain_graph=True), losses kept"),
    "resnet-big-batch": ("resnet-big", resnet, clean, "batch too large for the memory limit"),
    "resnet-wide-head": ("resnet-wide", resnet, clean, None),
    "vit-frozen": ("vit-frozen", lambda s, d: vit(s, d, frozen=True), clean, None),
    "gpt2-accum": ("gpt2-accum", gpt2, accumulate, None),
    "bert-amp": ("bert-amp", bert, amp, None),
}


def run(name, size, output, steps=6, memory_limit_mib=None, threads=None, batch=None):
    family, build, loop, _ = JOBS[name]
    s = dict(SIZES[family][size], steps=steps)
    if batch is not None:
        # Another batch for the same job (a capacity search's tries): the
        # samples per step, or per micro-batch under accumulation.
        key = "batch" if "batch" in s else "micro" if "micro" in s else None
        if key is None:
            print(f"--batch: {name} sets its batch from a token budget; not allowed", file=sys.stderr)
            return 2
        s[key] = batch
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cpu":
        # On the 2-vCPU machine this corpus was sized on, two OpenMP threads ran these
        # loops ~8x slower than one (the cores contend); --threads overrides.
        torch.set_num_threads(threads or 1)
    elif threads:
        torch.set_num_threads(threads)
    limit = memory_limit_mib or s.get("memory_limit_mib")
    if limit and device.type == "cuda":
        device = memdiag.limit_memory(limit, device)
    elif limit and memory_limit_mib:
        print("--memory-limit-mib applies to CUDA only; ignored on the CPU", file=sys.stderr)
    torch.manual_seed(0)
    model, opt, batch, forward = build(s, device)
    model.train()
    os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
    start = time.time()
    try:
        with memdiag.record(model, opt, output=output, name=name, steps=steps):
            loop(model, opt, batch, forward, steps)
    except torch.OutOfMemoryError as e:  # the recorder has written the report by now
        print(f"{name}: out of memory: {str(e).splitlines()[0]}", file=sys.stderr)
        return 1
    finally:
        print(f"{name} ({size}, {device}): {time.time() - start:.1f} s, report {output}")
    return 0


def in_child(log_path, append, job, raised=1):
    """job() in a child forked from this process, its output into log_path
    (appended to, or written anew), its exit code job()'s return value
    (`raised` where it raised: the traceback is in the log)."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        rc = raised
        try:
            flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
            log = os.open(log_path, flags, 0o644)
            os.dup2(log, 1)
            os.dup2(log, 2)
            rc = job()
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(rc)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def run_all(size, folder, steps=6):
    """Every job, each in a child forked from this process once torch,
    torchvision and transformers are imported (about 4 s of CPU a job on
    the 2-core machine when each job imports them itself). A child starts
    from what a fresh process that imported them would have: nothing of
    torch's has run, so no thread pool is forked. DIR/NAME.json and
    DIR/NAME.log as `run` writes them; a line per job on stdout."""
    # The children ask torch.cuda.is_available(); asked here first without
    # NVML it would poison every fork after it (CUDA cannot start again in
    # a forked child): through NVML it does not.
    os.environ["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
    import torchvision
    import transformers
    # transformers imports a model's module on first use: touched here, once.
    for name in ("BertConfig", "BertForMaskedLM", "GPT2Config", "GPT2LMHeadModel"):
        getattr(transformers, name)
    torchvision.models.VisionTransformer  # noqa: B018
    os.makedirs(folder, exist_ok=True)
    failed = 0
    for name in JOBS:
        start = time.time()
        rc = in_child(os.path.join(folder, name + ".log"), False,
                      lambda: run(name, size, os.path.join(folder, name + ".json"), steps))
        failed |= rc not in (0, 1)  # 1: the job ran out of memory, its report written
        print(f"corpus: {name} ({size}) exit {rc} in {time.time() - start:.1f} s", flush=True)
    return 1 if failed else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="print the job names")
    r = sub.add_parser("run", help="run one job under the recorder")
    r.add_argument("name", choices=sorted(JOBS))
    r.add_argument("--size", choices=["cpu", "gpu"], default="cpu")
    r.add_argument("-o", "--output", required=True)
    r.add_argument("--steps", type=int, default=6)
    r.add_argument("--memory-limit-mib", type=float, default=None,
                   help="cap the process's share of the GPU (memdiag.limit_memory); CUDA only")
    r.add_argument("--threads", type=int, default=None, help="CPU threads (default 1 on the CPU)")
    r.add_argument("--batch", type=int, default=None,
                   help="samples per step instead of the size's (per micro-batch under accumulation); "
                        "not for the dynamic-batching jobs")
    a = sub.add_parser("run-all", help="every job, each in a child of one process that imported the libraries")
    a.add_argument("--size", choices=["cpu", "gpu"], default="cpu")
    a.add_argument("--dir", required=True, help="where NAME.json and NAME.log go")
    a.add_argument("--steps", type=int, default=6)
    args = ap.parse_args(argv)
    if args.command == "list":
        print("\n".join(JOBS))
        return 0
    if args.command == "run-all":
        return run_all(args.size, args.dir, args.steps)
    if args.batch is not None and args.batch < 1:
        ap.error(f"--batch: {args.batch} is not a batch (allowed: 1 or more)")
    return run(args.name, args.size, args.output, args.steps, args.memory_limit_mib, args.threads, args.batch)


if __name__ == "__main__":
    sys.exit(main())
