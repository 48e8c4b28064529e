"""Before/after-a-fix jobs recorded with memdiag.record (s69).

python jobs.py PAIR VARIANT [--count]
  PAIR    A gpt2 | B bert accumulation | C resnet18 | D llama kept logits | E bert loss sum | F vit
  VARIANT base, or the remedy's label (written as variant=)
  --count no memdiag: one step, counting the forward's saved tensors myself (unique storages)
"""
import sys, time, json, argparse
import torch, torch.nn as nn, torch.nn.functional as F
import models

ap = argparse.ArgumentParser()
ap.add_argument("pair"); ap.add_argument("variant"); ap.add_argument("--count", action="store_true")
a = ap.parse_args()
P, V = a.pair, a.variant
NAMES = dict(A="gpt2-fix", B="bert-accum", C="resnet18-opt", D="llama-kept", E="bert-losssum", F="vit-fix")
STEPS = dict(A=6, B=6, C=6, D=10, E=6, F=6)[P]

torch.manual_seed(0)
gen = torch.Generator().manual_seed(1234)

if P == "A":
    model = models.gpt2()
    if V == "checkpointing": model.gradient_checkpointing_enable()
elif P in "BE":
    model = models.bert()
elif P == "C":
    model = models.resnet18()
elif P == "D":
    model = models.llama()
elif P == "F":
    model = models.vit()
    if V in ("checkpointing", "remat"):
        from torch.utils.checkpoint import checkpoint
        class Ckpt(nn.Module):
            def __init__(self, m): super().__init__(); self.m = m
            def forward(self, x): return checkpoint(self.m, x, use_reentrant=False)
        model.encoder.layers = nn.Sequential(*[Ckpt(l) for l in model.encoder.layers])
model.train()

if P in "CF" and V == "sgd":
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
elif P == "C" and V == "freeze-backbone":
    for n, p in model.named_parameters(): p.requires_grad_(n.startswith("fc."))
    opt = torch.optim.Adam(model.fc.parameters(), lr=1e-3)
elif P == "C":
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
else:
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

# identical data in every variant
if P == "C":
    Cx = torch.randn(16, 3, 64, 64, generator=gen); Cy = torch.randint(0, 10, (16,), generator=gen)
def batch():
    if P == "A": ids = torch.randint(0, 8192, (4, 256), generator=gen); return dict(input_ids=ids, labels=ids)
    if P in "BE":
        ids = torch.randint(0, 30522, (16, 128), generator=gen)
        return dict(input_ids=ids, attention_mask=torch.ones_like(ids), labels=torch.randint(0, 4, (16,), generator=gen))
    if P == "C": return Cx, Cy
    if P == "D": ids = torch.randint(0, 16384, (8, 128), generator=gen); return dict(input_ids=ids, labels=ids)
    if P == "F": return torch.randn(32, 3, 64, 64, generator=gen), torch.randint(0, 10, (32,), generator=gen)

losses = []
kept = []
total = 0.0

def step():
    global total
    b = batch()
    if P == "A":
        if V == "autocast-bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                out = model(**b)
        else:
            out = model(**b)
        out.loss.backward(); l = out.loss.item()
    elif P == "B":
        if V in ("accumulate=4", "microbatch"):
            l = 0.0
            for k in range(4):
                sl = slice(4 * k, 4 * k + 4)
                out = model(**{n: t[sl] for n, t in b.items()})
                (out.loss / 4).backward(); l += out.loss.item() / 4
        else:
            out = model(**b); out.loss.backward(); l = out.loss.item()
    elif P == "E":
        out = model(**b); out.loss.backward()
        if V == "fix-leak": total += out.loss.item()
        else: total = total + out.loss          # the bug
        l = out.loss.item()
    elif P == "D":
        out = model(**b); out.loss.backward()
        if V == "fix-leak": kept.append(out.logits.argmax(-1))
        else: kept.append(out.logits)            # the bug
        l = out.loss.item()
    else:  # C, F
        x, y = b
        if V == "autocast-bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x), y)
        elif V == "split=2":   # chunks run forward before ONE backward (should not help)
            loss = F.cross_entropy(torch.cat([model(c) for c in x.chunk(2)]), y)
        else:
            loss = F.cross_entropy(model(x), y)
        loss.backward(); l = loss.item()
    opt.step()
    opt.zero_grad(set_to_none=not (V == "set-to-none-false"))
    if V == "empty-cache": torch.cuda.empty_cache()
    losses.append(l)

if a.count:
    # my own count: unique storages saved for backward in one forward (+ loss), plus model state
    saved = {}
    def pack(t):
        try: s = t.untyped_storage(); saved[s.data_ptr()] = s.nbytes()
        except Exception: pass
        return t
    b = batch()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        if P in "C F".split() or P in "CF":
            x, y = b; out = model(x); loss = F.cross_entropy(out, y); logits = out
        else:
            if P == "B" and V in ("accumulate=4", "microbatch"): b = {n: t[:4] for n, t in b.items()}
            if P == "A" and V == "autocast-bf16":
                with torch.autocast("cpu", dtype=torch.bfloat16): o = model(**b)
            else: o = model(**b)
            loss = o.loss; logits = o.logits
    pids = {p.untyped_storage().data_ptr() for p in model.parameters()}
    act = sum(v for k, v in saved.items() if k not in pids) / 2**20
    w = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
    tw = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad) / 2**20
    print(json.dumps(dict(pair=P, variant=V, saved_non_param_mib=round(act, 2), weights_mib=round(w, 2),
                          trainable_mib=round(tw, 2), logits_mib=round(logits.numel() * logits.element_size() / 2**20, 2))))
    sys.exit(0)

import memdiag
t0 = time.time()
with memdiag.record(model, opt, output=f"r/{P}-{V}.json", name=NAMES[P], seed=0,
                    variant=None if V == "base" else V):
    for _ in range(STEPS): step()
print(json.dumps(dict(pair=P, variant=V, wall_s=round(time.time() - t0, 2), losses=[round(x, 6) for x in losses])))
