#!/usr/bin/env python3
"""The recorder's forward-by-module figures against PyTorch's own MemTracker
(torch.distributed._tools.mem_tracker), on library models of the corpus.

    python3 scripts/module-crosscheck.py [--size cpu|gpu] [--jobs resnet-clean,gpt2-clean] [--tolerance 0.10]

Each job trains two steps under memdiag.record(), and again, rebuilt from
the same seed, under MemTracker (its module statistics reset before step 1).
MemTracker counts tensor storages through a dispatch mode; the recorder
reads the caching allocator's counter from forward hooks. For every module
the recorder lists with at least 1% of the forward, its forward increment
(allocated after its forward less before it) is set beside MemTracker's
(its snapshot's total after the module's forward less before it, on step
1). Exit 1 when any differs by more than the tolerance of the module's
figure or 0.5% of the forward, whichever is larger (MemTracker's own tests
accept 10% of the peak).
"""
import argparse
import json
import os
import sys
import tempfile

import torch

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "python", "jobs"))
import corpus  # noqa: E402
import memdiag  # noqa: E402

MIB = float(1 << 20)


def build(name, size, device):
    family, builder, _, _ = corpus.JOBS[name]
    s = dict(corpus.SIZES[family][size], steps=2)
    torch.manual_seed(0)
    model, opt, batch, forward = builder(s, device)
    model.train()
    return model, opt, batch, forward


def train_step(model, opt, batch, forward, step):
    loss, _ = forward(model, batch(step))
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def recorder_modules(name, size, device, folder):
    model, opt, batch, forward = build(name, size, device)
    out = os.path.join(folder, name + ".json")
    with memdiag.record(model, opt, output=out, name=name, steps=2, kept=False):
        for step in range(2):
            train_step(model, opt, batch, forward, step)
    report = json.load(open(out))
    ev = [e for e in report["events"] if e["kind"] == "modules"]
    return ev[-1]


def memtracker_modules(name, size, device):
    from torch.distributed._tools.mem_tracker import MemTracker, _ModState
    model, opt, batch, forward = build(name, size, device)
    names = {id(m): n for n, m in model.named_modules(remove_duplicate=False)}
    mt = MemTracker()
    mt.track_external(model, opt)
    with mt:
        for step in range(2):
            if step == 1:
                mt.reset_mod_stats()
            train_step(model, opt, batch, forward, step)
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    out = {}
    for mod, stats in mt.memory_tracking.items():
        snaps = stats.snapshots
        if not snaps.get(_ModState.PRE_FW) or not snaps.get(_ModState.POST_FW):
            continue
        pre, post = snaps[_ModState.PRE_FW][-1], snaps[_ModState.POST_FW][-1]
        if dev not in pre or dev not in post:
            continue
        key = names.get(id(mod))
        if key is not None:
            out[key] = (post[dev]["Total"] - pre[dev]["Total"]) / MIB
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--jobs", default="resnet-clean,vit-clean,bert-clean,gpt2-clean")
    ap.add_argument("--tolerance", type=float, default=0.10)
    args = ap.parse_args()
    try:
        import torchvision  # noqa: F401
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"module-crosscheck: skipped: {e.name} is not installed (scripts/setup.sh tests installs it)",
              file=sys.stderr)
        return 77
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        torch.set_num_threads(1)
    print(f"# python3 scripts/module-crosscheck.py --size {args.size} --jobs {args.jobs}   "
          f"torch {torch.__version__} on {torch.cuda.get_device_name() if device == 'cuda' else 'the CPU'}")
    print(f"{'job':<14} {'module':<34} {'type':<22} {'memdiag MiB':>12} {'MemTracker':>11} {'diff':>8}")
    bad = 0
    with tempfile.TemporaryDirectory() as folder:
        for name in args.jobs.split(","):
            ev = recorder_modules(name, args.size, device, folder)
            theirs = memtracker_modules(name, args.size, device)
            total = ev["mib"]
            compared, worst = 0, 0.0
            for m in ev["modules"]:
                if m["name"] is None or abs(m["mib"]) < 0.01 * total:
                    continue
                t = theirs.get(m["name"])
                if t is None:
                    print(f"{name:<14} {m['name'] or '(model)':<34} {m['type']:<22} {m['mib']:>12.2f} {'-':>11}   "
                          "not in MemTracker's modules")
                    bad = 1
                    continue
                diff = m["mib"] - t
                worst = max(worst, abs(diff))
                ok = abs(diff) <= max(args.tolerance * abs(t), 0.005 * total)
                bad |= not ok
                compared += 1
                if compared <= 12 or not ok:
                    print(f"{name:<14} {m['name'] or '(model)':<34} {m['type']:<22} {m['mib']:>12.2f} {t:>11.2f} "
                          f"{diff:>+8.2f}{'' if ok else '  OUT OF TOLERANCE'}")
            print(f"{name:<14} {compared} modules of at least 1% of the forward ({total:.1f} MiB) compared, "
                  f"the largest difference {worst:.4f} MiB")
    return bad


if __name__ == "__main__":
    sys.exit(main())
