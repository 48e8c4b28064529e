#!/usr/bin/env python3
"""Cross-check memdiag's transformer workload against the same model written in Python.

    scripts/crosscheck-transformer.py REPORT_DIR [--tolerance MIB] [--device cuda]
    scripts/crosscheck-transformer.py REPORT.json --trace-diff SNAPSHOT.pickle


For each report in REPORT_DIR made by memory_diagnostics from a transformer
case (remedies among none, efficient-attention, checkpoint=N and autocast-bf16), builds the
model from torch.nn modules (Embedding, LayerNorm, Linear, GELU) with the
attention spelt out or through torch.nn.functional.scaled_dot_product_attention,
trains it as memory_diagnostics does (next-token prediction over random
tokens, AdamW with foreach=False, one tensor per parameter as LibTorch's
AdamW), reads torch.cuda.memory_allocated() and memory_reserved() at the same
phase boundaries in a fresh process per report, and prints the largest
difference per report. Exits 1 if any phase differs by more than the
tolerance (default 1 MiB) or the phases differ.

--trace-diff says where two runs part: it replays REPORT (made with
--memory-snapshot SNAPSHOT) in Python with the allocator's history recorded,
and prints the first allocation or free whose size differs between the two
histories, with the phase memdiag was in and the Python line that made it.
"""
import argparse
import json
import math
import os
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint_sequential

from memdiag_warmup import warm_up

MIB = 1024.0 * 1024.0
REENTRANT = [False]  # --checkpoint reentrant: torch.utils.checkpoint's reentrant variant


class Embed(nn.Module):
    def __init__(self, m, length):
        super().__init__()
        self.tokens = nn.Embedding(m["vocab"], m["width"])
        self.positions = nn.Embedding(length, m["width"])
        self.dropout = nn.Dropout(m["dropout"])
        nn.init.normal_(self.tokens.weight, 0.0, 0.02)
        nn.init.normal_(self.positions.weight, 0.0, 0.02)

    def forward(self, ids):
        where = torch.arange(ids.size(1), device=ids.device)
        return self.dropout(self.tokens(ids) + self.positions(where))


class Block(nn.Module):
    def __init__(self, m, kernel):
        super().__init__()
        w, f = m["width"], m["ffn_width"]
        self.heads, self.kernel, self.p = m["heads"], kernel, m["dropout"]
        self.norm1, self.qkv, self.proj = nn.LayerNorm(w), nn.Linear(w, 3 * w), nn.Linear(w, w)
        self.norm2, self.up, self.down = nn.LayerNorm(w), nn.Linear(w, f), nn.Linear(f, w)
        self.dropout = nn.Dropout(m["dropout"])

    def attention(self, x):
        b, t, w = x.shape
        d = w // self.heads
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d).permute(2, 0, 3, 1, 4).unbind(0)
        p = self.p if self.training else 0.0
        if self.kernel == "math":
            scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(d))
            future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(future, float("-inf"))
            probs = torch.softmax(scores, -1)
            if p > 0:
                probs = F.dropout(probs, p, training=True)
            out = torch.matmul(probs, v)
        else:
            out = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
        return self.dropout(self.proj(out.transpose(1, 2).reshape(b, t, w)))

    def forward(self, x):
        x = x + self.attention(self.norm1(x))
        return x + self.dropout(self.down(F.gelu(self.up(self.norm2(x)))))


class Head(nn.Module):
    def __init__(self, m, tied):
        super().__init__()
        self.norm = nn.LayerNorm(m["width"])
        self.tied = tied
        self.out = None if m["tied_embeddings"] else nn.Linear(m["width"], m["vocab"], bias=False)

    def forward(self, x):
        h = self.norm(x)
        return self.out(h) if self.out is not None else torch.matmul(h, self.tied[0].weight.t())


RECORDING = [False]
MARKS = []  # (phase label, requests recorded so far) at each mark, when the history is recorded
ACTIVE = []  # at each mark: the allocator's active blocks, address -> (bytes, frames)


def mark(samples, device, phase, step=None):
    torch.cuda.synchronize(device)
    if RECORDING[0]:
        label = f"phase={phase}" + (f" step={step}" if step is not None else "")
        snap = torch.cuda.memory._snapshot()
        MARKS.append((label, len(events(snap["device_traces"][device.index or 0]))))
        # The blocks the allocator holds for tensors now, with the frames
        # that made them: what the history's running sum cannot explain.
        ACTIVE.append({b["address"]: (b["size"], b.get("frames", [])) for seg in snap["segments"]
                       if seg.get("device") == (device.index or 0) for b in seg["blocks"]
                       if b["state"] == "active_allocated"})
    samples.append({"phase": phase, "step": step,
                    "allocated_mib": torch.cuda.memory_allocated(device) / MIB,
                    "reserved_mib": torch.cuda.memory_reserved(device) / MIB})


def run(report, device, record=False):
    m = report["case"]["model"]
    if m.get("type") != "transformer":
        return None
    cfg = report["config"]
    remedies = {r.partition("=")[0]: r.partition("=")[2] for r in cfg.get("remedies", [])}
    if set(remedies) - {"efficient-attention", "checkpoint", "autocast-bf16"} or m["dtype"] != "float32" or \
            report["case"]["optimizer"]["type"] != "adamw":
        return None
    kernel = "sdpa" if "efficient-attention" in remedies else m["attention"]
    torch.manual_seed(cfg["seed"])
    samples = []
    RECORDING[0] = record
    if record:
        torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python", max_entries=10**7)
    warm_up(device)

    # --sequence-length overrides the preset's (config.sequence_length).
    length = cfg.get("sequence_length") or m["sequence_length"]
    embed = Embed(m, length)
    model = nn.Sequential(embed, *[Block(m, kernel) for _ in range(m["layers"])], Head(m, [embed.tokens]))
    model.to(device)
    mark(samples, device, "model_ready")
    o = report["case"]["optimizer"]
    opt = torch.optim.AdamW(model.parameters(), lr=o["lr"], betas=(o["beta1"], o["beta2"]), eps=o["eps"],
                            weight_decay=o["weight_decay"], foreach=False)
    mark(samples, device, "optimizer_ready")
    batch, vocab = cfg["batch_size_per_device"], m["vocab"]
    segments = int(remedies["checkpoint"]) if remedies.get("checkpoint") else None
    for step in range(cfg["steps"]):
        ids = torch.randint(0, vocab, (batch, length + 1), device=device)
        xs, ys = ids[:, :length], ids[:, 1:]
        # memdiag's autocast scope holds the model's forward; the loss is
        # taken outside it, on the logits made float.
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled="autocast-bf16" in remedies):
            logits = checkpoint_sequential(model, segments, xs, use_reentrant=REENTRANT[0]) if segments else model(xs)
        loss = F.cross_entropy(logits.float().reshape(-1, vocab), ys.reshape(-1))
        mark(samples, device, "forward", step)
        loss.backward()
        loss.item()
        mark(samples, device, "backward", step)
        opt.step()
        mark(samples, device, "step", step)
        opt.zero_grad(set_to_none=True)
        del ids, xs, ys, logits, loss
        mark(samples, device, "cleanup", step)
    return samples


def events(trace):
    """The requests of a history: (action, bytes) of each alloc and free."""
    return [e for e in trace if e["action"] in ("alloc", "free_requested")]


def trace_diff(snapshot_path, report_path, device):
    """Per phase, the allocations and frees (by size) one history has and the other has not."""
    import collections
    import pickle
    report = json.load(open(report_path))
    ours = events(pickle.load(open(snapshot_path, "rb"))["device_traces"][device.index or 0])
    theirs_samples = run(report, device, record=True)
    theirs = events(torch.cuda.memory._snapshot()["device_traces"][device.index or 0])
    print(f"memdiag {len(ours)} requests, Python {len(theirs)}")
    # memdiag labels each request with the phase it was made in; the Python
    # run's phase is the span between two marks.
    # The label is the main thread's: autograd's backward thread makes its
    # requests unlabelled, so a request without one belongs to the phase of
    # the last labelled request before it (backward's first request, the
    # gradient of the loss, is made on the main thread).
    by_phase_ours = collections.defaultdict(list)
    current = "phase=setup"
    for e in ours:
        current = e.get("user_metadata") or current
        # memdiag's warm-up is its setup phase; Python's is before its first mark.
        by_phase_ours[MARKS[0][0] if current == "phase=setup" and MARKS else current].append(e)
    by_phase_theirs, start = {}, 0
    for label, end in MARKS:
        by_phase_theirs[label] = theirs[start:end]
        start = end

    order = {label: i for i, (label, _) in enumerate(MARKS)}

    def order_of(label):
        return order.get(label, len(order))

    def where(e):
        frames = [f for f in e.get("frames", []) if f["filename"].endswith(".py")]
        return " <- ".join(f"{f['filename'].rsplit('/', 1)[-1]}:{f['line']} {f['name']}" for f in frames[:3])

    differ = 0
    for (label, _), sample_ours, sample_theirs in zip(MARKS, report["samples"], theirs_samples):
        a = collections.Counter((e["action"], e["size"]) for e in by_phase_ours.get(label, []))
        b = collections.Counter((e["action"], e["size"]) for e in by_phase_theirs.get(label, []))
        d_alloc = sample_ours["allocated_mib"] - sample_theirs["allocated_mib"]
        if a == b and abs(d_alloc) < 1e-9:
            continue
        differ += 1
        print(f"{label}: allocated memdiag - python = {d_alloc:+.4f} MiB; "
              f"{sum(a.values())} vs {sum(b.values())} requests")
        for key in sorted(set(a) | set(b)):
            if a[key] != b[key]:
                made = [e for e in by_phase_theirs.get(label, []) if (e["action"], e["size"]) == key]
                print(f"    {key[0]:14s} {key[1]:>12d} bytes: memdiag {a[key]}, python {b[key]}"
                      f"  {where(made[0]) if made else ''}")
    print("every phase has the same requests" if differ == 0 else f"{differ} phases differ")
    # What each side's allocated figure holds beyond its own history's
    # running sum: memory the history did not see being made (or freed).
    print("allocated minus the history's running sum (MiB), memdiag | python:")
    for (label, _), a, b in zip(MARKS, report["samples"], theirs_samples):
        live_a = sum(e["size"] if e["action"] == "alloc" else -e["size"]
                     for lab, evs in by_phase_ours.items() if order_of(lab) <= order_of(label) for e in evs)
        live_b = sum(e["size"] if e["action"] == "alloc" else -e["size"] for e in theirs[:dict(MARKS)[label]])
        print(f"    {label:24s} {a['allocated_mib'] - live_a / MIB:+9.4f} | {b['allocated_mib'] - live_b / MIB:+9.4f}")
    # The requests' bytes (the histories' running sums) against the
    # allocator's block bytes: equal requests with unequal blocks are the
    # allocator's choices (a block it did not split is counted whole in
    # allocated), not a different workload.
    print("requested bytes live (history running sums), memdiag - python (MiB):")
    for label, _ in MARKS:
        live_a = sum(e["size"] if e["action"] == "alloc" else -e["size"]
                     for lab, evs in by_phase_ours.items() if order_of(lab) <= order_of(label) for e in evs)
        live_b = sum(e["size"] if e["action"] == "alloc" else -e["size"] for e in theirs[:dict(MARKS)[label]])
        print(f"    {label:24s} {(live_a - live_b) / MIB:+9.4f}")
    # Where the two sequences of requests first part, in order (equal
    # multisets in a phase can still come in another order, and the order
    # decides which cached block serves a request).
    # Each phase's requests in order, side by side, where they first part.
    parted = 0
    for label, _ in MARKS:
        seq_a = by_phase_ours.get(label, [])
        seq_b = by_phase_theirs.get(label, [])
        for i, (x, y) in enumerate(zip(seq_a, seq_b)):
            if (x["action"], x["size"]) != (y["action"], y["size"]):
                parted += 1
                print(f"{label}: the sequences part at its request {i}:")
                for j in range(max(0, i - 2), min(len(seq_a), len(seq_b), i + 4)):
                    print(f"    {j:6d} memdiag {seq_a[j]['action']:14s} {seq_a[j]['size']:>10d} | "
                          f"python {seq_b[j]['action']:14s} {seq_b[j]['size']:>10d}  {where(seq_b[j])}")
                break
    if not parted:
        print("the sequences of requests are the same, in order, in every phase")
    # The Python side's blocks that its history never saw made (or saw
    # freed): their sizes and where they were made.
    print("python: active blocks the history does not account for, at each mark:")
    live = {}
    start = 0
    for (label, end), active in zip(MARKS, ACTIVE):
        for e in theirs[start:end]:
            if e["action"] == "alloc":
                live[e["addr"]] = e["size"]
            else:
                live.pop(e["addr"], None)
        start = end
        unexplained = {a: v for a, v in active.items() if live.get(a) != v[0]}
        missing = {a: n for a, n in live.items() if a not in active}
        if not unexplained and not missing:
            continue
        print(f"    {label}: {len(unexplained)} blocks ({sum(v[0] for v in unexplained.values()) / MIB:.4f} MiB) "
              f"active but not live in the history; {len(missing)} ({sum(missing.values()) / MIB:.4f} MiB) live in "
              f"the history but not active")
        for a, (size, frames) in sorted(unexplained.items(), key=lambda kv: -kv[1][0])[:4]:
            py = [f for f in frames if f["filename"].endswith(".py")][:3]
            print(f"        {size:>10d} bytes at {a:#x}: "
                  + (" <- ".join(f"{f['filename'].rsplit('/', 1)[-1]}:{f['line']} {f['name']}" for f in py)
                     or (frames[0]["name"] if frames else "no frames")))
    return 1 if differ else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports")
    ap.add_argument("--tolerance", type=float, default=1.0, help="MiB (default 1)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--single", help=argparse.SUPPRESS)
    ap.add_argument("--checkpoint", choices=("non-reentrant", "reentrant"), default="non-reentrant",
                    help="torch.utils.checkpoint's variant for checkpoint=N reports (default non-reentrant, as "
                         "PyTorch recommends; memory_diagnostics recomputes a segment and differentiates it "
                         "again, as the reentrant one does)")
    ap.add_argument("--trace-diff", metavar="SNAPSHOT", help="memdiag's --memory-snapshot of the report REPORT_DIR names")
    ap.add_argument("--phases", action="store_true", help="print every phase where the two differ")
    args = ap.parse_args()
    device = torch.device(args.device)
    REENTRANT[0] = args.checkpoint == "reentrant"
    if args.trace_diff:
        return trace_diff(args.trace_diff, args.reports, device)
    if args.single:
        print(json.dumps(run(json.load(open(args.single)), device)))
        return 0
    bad = False
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(device)}; checkpoint: {args.checkpoint}")
    print(f"{'report':44s} {'phases':>7s} {'max |d alloc| MiB':>18s} {'max |d reserved| MiB':>21s}")
    for name in sorted(f for f in os.listdir(args.reports) if f.endswith(".json")):
        path = os.path.join(args.reports, name)
        report = json.load(open(path))
        out = subprocess.run([sys.executable, os.path.abspath(__file__), args.reports, "--device", args.device,
                              "--checkpoint", args.checkpoint, "--single", path], check=True, capture_output=True, text=True).stdout
        theirs = json.loads(out.strip().splitlines()[-1])
        if theirs is None:
            print(f"{name:44s} skipped (not a transformer report this script rebuilds)")
            continue
        ours = report["samples"]
        same = [(s["phase"], s["step"]) for s in ours] == [(s["phase"], s["step"]) for s in theirs]
        d_alloc = max(abs(a["allocated_mib"] - b["allocated_mib"]) for a, b in zip(ours, theirs))
        d_res = max(abs((a["reserved_mib"] or 0) - b["reserved_mib"]) for a, b in zip(ours, theirs))
        bad = bad or not same or d_alloc > args.tolerance
        print(f"{name:44s} {('same' if same else 'DIFFER'):>7s} {d_alloc:18.4f} {d_res:21.4f}")
        if args.phases:
            # Every phase where the two differ, memdiag | Python.
            for a, b in zip(ours, theirs):
                da, dr = a["allocated_mib"] - b["allocated_mib"], (a["reserved_mib"] or 0) - b["reserved_mib"]
                if abs(da) > 1e-9 or abs(dr) > 1e-9:
                    step = "" if a["step"] is None else f" step={a['step']}"
                    print(f"    {a['phase'] + step:20s} allocated {a['allocated_mib']:10.3f} | {b['allocated_mib']:10.3f}"
                          f"   reserved {a['reserved_mib'] or 0:10.1f} | {b['reserved_mib']:10.1f}")
    print("every phase within %.1f MiB: %s" % (args.tolerance, "no" if bad else "yes"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
