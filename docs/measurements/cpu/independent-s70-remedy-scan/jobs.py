"""Remedy jobs of s69 (A gpt2, B bert, C resnet18, F vit), scanned over batch and steps (s70).

python jobs.py PAIR VARIANT --batch B --steps S
  PAIR    A gpt2 | B bert | C resnet18 (one fixed batch, memorised) | F vit
  VARIANT base, or the remedy's label (written as variant=):
          A: checkpointing (HF), autocast-bf16, sgd
          B: accumulate=4, sgd, freeze-embeddings (word embeddings frozen)
          C: sgd, freeze-backbone, autocast-bf16
          F: checkpointing (torch.utils.checkpoint per block), autocast-bf16, sgd, accumulate=4
  report: r/{PAIR}-b{B}-s{S}-{VARIANT}.json (case name fixed per pair, so batches/steps form sweeps)
Copied from ../independent-s69-remedies/jobs.py and extended (batch, steps, new variants); the
s69 variants are unchanged (same seeds, same data draws, same optimizers).
"""
import sys, time, json, argparse
import torch, torch.nn as nn, torch.nn.functional as F
import models

ap = argparse.ArgumentParser()
ap.add_argument("pair"); ap.add_argument("variant")
ap.add_argument("--batch", type=int, required=True); ap.add_argument("--steps", type=int, required=True)
a = ap.parse_args()
P, V, B, STEPS = a.pair, a.variant, a.batch, a.steps
NAMES = dict(A="gpt2-scan", B="bert-scan", C="resnet18-scan", F="vit-scan")
ACC = V == "accumulate=4"
if ACC: assert B % 4 == 0, "accumulate=4 needs a batch divisible by 4"

torch.manual_seed(0)
gen = torch.Generator().manual_seed(1234)

if P == "A":
    model = models.gpt2()
    if V == "checkpointing": model.gradient_checkpointing_enable()
elif P == "B":
    model = models.bert()
    if V == "freeze-embeddings": model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
elif P == "C":
    model = models.resnet18()
    if V == "freeze-backbone":
        for n, p in model.named_parameters(): p.requires_grad_(n.startswith("fc."))
elif P == "F":
    model = models.vit()
    if V == "checkpointing":
        from torch.utils.checkpoint import checkpoint
        class Ckpt(nn.Module):
            def __init__(self, m): super().__init__(); self.m = m
            def forward(self, x): return checkpoint(self.m, x, use_reentrant=False)
        model.encoder.layers = nn.Sequential(*[Ckpt(l) for l in model.encoder.layers])
model.train()

params = [p for p in model.parameters() if p.requires_grad]
if V == "sgd":
    opt = torch.optim.SGD(params, lr=0.01)
elif P == "C":
    opt = torch.optim.Adam(params, lr=1e-3)
else:
    opt = torch.optim.AdamW(params, lr=1e-3)

# identical data in every variant of one (batch, steps) point
if P == "C":
    Cx = torch.randn(B, 3, 64, 64, generator=gen); Cy = torch.randint(0, 10, (B,), generator=gen)
def batch():
    if P == "A": ids = torch.randint(0, 8192, (B, 256), generator=gen); return dict(input_ids=ids, labels=ids)
    if P == "B":
        ids = torch.randint(0, 30522, (B, 128), generator=gen)
        return dict(input_ids=ids, attention_mask=torch.ones_like(ids), labels=torch.randint(0, 4, (B,), generator=gen))
    if P == "C": return Cx, Cy
    if P == "F": return torch.randn(B, 3, 64, 64, generator=gen), torch.randint(0, 10, (B,), generator=gen)

def fwd_loss(b):
    if P in "AB":
        return model(**b).loss
    x, y = b
    return F.cross_entropy(model(x), y)

losses = []
def step():
    b = batch()
    if ACC:
        l = 0.0
        m = B // 4
        for k in range(4):
            if P in "AB": mb = {n: t[m * k:m * (k + 1)] for n, t in b.items()}
            else: mb = tuple(t[m * k:m * (k + 1)] for t in b)
            loss = fwd_loss(mb)
            (loss / 4).backward(); l += loss.item() / 4
    else:
        if V == "autocast-bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = fwd_loss(b)
        else:
            loss = fwd_loss(b)
        loss.backward(); l = loss.item()
    opt.step()
    opt.zero_grad(set_to_none=True)
    losses.append(l)

import memdiag
t0 = time.time()
with memdiag.record(model, opt, output=f"r/{P}-b{B}-s{STEPS}-{V}.json", name=NAMES[P], seed=0,
                    variant=None if V == "base" else V):
    for _ in range(STEPS): step()
print(json.dumps(dict(pair=P, variant=V, batch=B, steps=STEPS, wall_s=round(time.time() - t0, 2),
                      losses=[round(x, 6) for x in losses])))
