"""Independent test jobs for memdiag (session s71 tester).

python jobs.py JOB --mode MODE --batch B --steps S -o OUT.json [--variant V] [--no-record]

Every job builds a library (or hand-made) model with random weights, on the CPU,
and records its training loop with memdiag.record.  Nothing is downloaded.
"""
import argparse
import copy
import contextlib
import math
import random
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import memdiag

torch.set_num_threads(1)


def rec(args, model, opts, **kw):
    if args.no_record:
        return contextlib.nullcontext()
    name = kw.pop("name", args.job + ("" if args.mode in ("clean",) else "-" + args.mode))
    if args.name:
        name = args.name
    opt = dict(output=args.output, name=name, steps=args.steps)
    if args.variant:
        opt["variant"] = args.variant
    opt.update(kw)
    return memdiag.record(model, opts, **opt)


# ---------------------------------------------------------------- 1. T5 seq2seq
def job_t5(a):
    from transformers import T5Config, T5ForConditionalGeneration
    cfg = T5Config(vocab_size=1000, d_model=128, d_ff=512, num_layers=2, num_decoder_layers=2,
                   num_heads=4, d_kv=32, dropout_rate=0.1, decoder_start_token_id=0, pad_token_id=0)
    model = T5ForConditionalGeneration(cfg).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(0)
    with rec(a, model, opt):
        for step in range(a.steps):
            ids = torch.randint(1, 1000, (a.batch, 128), generator=g)
            mask = torch.ones_like(ids)
            labels = torch.randint(1, 1000, (a.batch, 32), generator=g)
            out = model(input_ids=ids, attention_mask=mask, labels=labels)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 2. detection
def job_det(a):
    import torchvision
    model = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_fpn(
        weights=None, weights_backbone=None, num_classes=5, min_size=224, max_size=320).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(0)
    sizes = [(224, 224), (240, 320), (320, 240), (200, 300), (256, 256), (180, 320)]
    with rec(a, model, opt):
        for step in range(a.steps):
            imgs, tgts = [], []
            for i in range(a.batch):
                h, w = sizes[(step + i) % len(sizes)]
                imgs.append(torch.rand(3, h, w, generator=g))
                n = 3
                x0 = torch.rand(n, generator=g) * (w / 2)
                y0 = torch.rand(n, generator=g) * (h / 2)
                boxes = torch.stack([x0, y0, x0 + 20 + torch.rand(n, generator=g) * w / 3,
                                     y0 + 20 + torch.rand(n, generator=g) * h / 3], 1)
                tgts.append({"boxes": boxes, "labels": torch.randint(1, 5, (n,), generator=g)})
            losses = model(imgs, tgts)
            loss = sum(losses.values())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 3/4. GANs
class G(nn.Module):
    def __init__(s, nz=64, ngf=64):
        super().__init__()
        s.nz = nz
        s.net = nn.Sequential(
            nn.ConvTranspose2d(nz, ngf * 4, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 4), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 4, ngf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.ReLU(True),
            nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf), nn.ReLU(True),
            nn.ConvTranspose2d(ngf, 3, 4, 2, 1, bias=False), nn.Tanh())

    def forward(s, z):
        return s.net(z)


class D(nn.Module):
    def __init__(s, ndf=64, bn=True):
        super().__init__()
        norm = (lambda c: nn.BatchNorm2d(c)) if bn else (lambda c: nn.Identity())
        s.net = nn.Sequential(
            nn.Conv2d(3, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), norm(ndf * 2), nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf * 2, ndf * 4, 4, 2, 1, bias=False), norm(ndf * 4), nn.LeakyReLU(0.2, True),
            nn.Conv2d(ndf * 4, 1, 4, 1, 0, bias=False))

    def forward(s, x):
        return s.net(x).view(-1)


def job_gan(a):
    torch.manual_seed(0)
    netG, netD = G(), D()
    optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    crit = nn.BCEWithLogitsLoss()
    g = torch.Generator().manual_seed(0)
    # mode "gen": record the generator with both optimizers (the docs' form)
    # mode "disc": record the discriminator with both optimizers
    model = netG if a.mode in ("gen", "clean") else netD
    with rec(a, model, [optD, optG]):
        for step in range(a.steps):
            real = torch.rand(a.batch, 3, 32, 32, generator=g) * 2 - 1
            # (1) D: real then fake (DCGAN tutorial order)
            netD.zero_grad(set_to_none=True)
            out = netD(real)
            errD_real = crit(out, torch.ones_like(out))
            errD_real.backward()
            z = torch.randn(a.batch, 64, 1, 1, generator=g)
            fake = netG(z)
            out = netD(fake.detach())
            errD_fake = crit(out, torch.zeros_like(out))
            errD_fake.backward()
            optD.step()
            # (2) G
            netG.zero_grad(set_to_none=True)
            out = netD(fake)
            errG = crit(out, torch.ones_like(out))
            errG.backward()
            optG.step()


def job_wgangp(a):
    torch.manual_seed(0)
    netG, netD = G(), D(bn=False)
    optD = torch.optim.Adam(netD.parameters(), lr=1e-4, betas=(0.0, 0.9))
    g = torch.Generator().manual_seed(0)
    netG.requires_grad_(False)
    # Record the critic's update only (5 critic steps per G step is usual; here the
    # critic step alone, the generator frozen and run under no_grad).
    with rec(a, netD, optD):
        for step in range(a.steps):
            real = torch.rand(a.batch, 3, 32, 32, generator=g) * 2 - 1
            with torch.no_grad():
                fake = netG(torch.randn(a.batch, 64, 1, 1, generator=g))
            d_real = netD(real).mean()
            d_fake = netD(fake).mean()
            loss = d_fake - d_real
            if a.mode in ("gp", "clean"):
                eps = torch.rand(a.batch, 1, 1, 1, generator=g)
                xh = (eps * real + (1 - eps) * fake).requires_grad_(True)
                dx = netD(xh)
                grad, = torch.autograd.grad(dx.sum(), xh, create_graph=True)
                gp = ((grad.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
                loss = loss + 10 * gp
            loss.backward()
            optD.step()
            optD.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 5. EMA
class MLP(nn.Module):
    def __init__(s, width=2048, depth=4, din=256, dout=10):
        super().__init__()
        layers = [nn.Linear(din, width), nn.GELU()]
        for _ in range(depth - 2):
            layers += [nn.Linear(width, width), nn.GELU()]
        layers += [nn.Linear(width, dout)]
        s.net = nn.Sequential(*layers)

    def forward(s, x):
        return s.net(x)


def job_ema(a):
    torch.manual_seed(0)
    model = MLP(width=2048, depth=5)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)   # no state at all
    if a.mode == "ema-adam":   # AdamW, EMA copy made at step 0 between backward() and step()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ema = None
    if a.mode == "ema-before":
        ema = copy.deepcopy(model).requires_grad_(False)
    g = torch.Generator().manual_seed(0)
    with rec(a, model, opt):
        for step in range(a.steps):
            x = torch.randn(a.batch, 256, generator=g)
            y = torch.randint(0, 10, (a.batch,), generator=g)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            if a.mode == "ema-adam" and ema is None:
                ema = copy.deepcopy(model).requires_grad_(False)
            opt.step()
            opt.zero_grad(set_to_none=True)
            if a.mode in ("ema", "ema-before", "ema-adam"):
                if ema is None:
                    ema = copy.deepcopy(model).requires_grad_(False)
                with torch.no_grad():
                    for pe, pm in zip(ema.parameters(), model.parameters()):
                        pe.mul_(0.999).add_(pm, alpha=0.001)


# ---------------------------------------------------------------- 6. LoRA
class LoRAConv1D(nn.Module):
    """Wraps transformers' Conv1D (GPT-2's c_attn / c_proj): y = base(x) + (x A) B * s."""
    def __init__(s, base, r=8, alpha=16):
        super().__init__()
        s.base = base
        nin, nout = base.weight.shape
        s.A = nn.Parameter(torch.randn(nin, r) / math.sqrt(nin))
        s.B = nn.Parameter(torch.zeros(r, nout))
        s.scale = alpha / r

    def forward(s, x):
        return s.base(x) + (x @ s.A) @ s.B * s.scale


def gpt2_small(n_layer=4, n_embd=256, vocab=2000, npos=256):
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=vocab, n_positions=npos, n_embd=n_embd, n_layer=n_layer, n_head=4)
    return GPT2LMHeadModel(cfg).train()


def job_lora(a):
    torch.manual_seed(0)
    model = gpt2_small()
    if a.mode in ("lora", "clean"):
        model.requires_grad_(False)
        for blk in model.transformer.h:
            blk.attn.c_attn = LoRAConv1D(blk.attn.c_attn)
            blk.attn.c_proj = LoRAConv1D(blk.attn.c_proj)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4)
    g = torch.Generator().manual_seed(0)
    with rec(a, model, opt):
        for step in range(a.steps):
            ids = torch.randint(0, 2000, (a.batch, 128), generator=g)
            out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 7. hooks keeping features
def resnet18_small():
    import torchvision
    return torchvision.models.resnet18(weights=None, num_classes=10).train()


def job_hook(a):
    torch.manual_seed(0)
    model = resnet18_small()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    feats = []

    def hook(mod, inp, out):
        if a.mode == "leak-detached":
            feats.append(out.detach())
        else:
            feats.append(out)
    if a.mode != "none":
        for m in model.modules():
            if isinstance(m, nn.Conv2d):
                m.register_forward_hook(hook)
    g = torch.Generator().manual_seed(0)
    with rec(a, model, opt):
        for step in range(a.steps):
            if a.mode == "cleared":
                feats.clear()
            x = torch.randn(a.batch, 3, 64, 64, generator=g)
            y = torch.randint(0, 10, (a.batch,), generator=g)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 8. keeping attentions / loss
def bert_small(num_labels=None, layers=4, hidden=256, vocab=2000, maxpos=256):
    from transformers import BertConfig, BertForSequenceClassification, BertForMaskedLM
    cfg = BertConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=4,
                     intermediate_size=4 * hidden, max_position_embeddings=maxpos)
    if num_labels:
        cfg.num_labels = num_labels
        return BertForSequenceClassification(cfg).train()
    return BertForMaskedLM(cfg).train()


def job_keep(a):
    torch.manual_seed(0)
    model = bert_small(num_labels=2)
    model.config._attn_implementation = "eager"
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    kept = []
    g = torch.Generator().manual_seed(0)
    with rec(a, model, opt):
        for step in range(a.steps):
            ids = torch.randint(0, 2000, (a.batch, 128), generator=g)
            labels = torch.randint(0, 2, (a.batch,), generator=g)
            out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels,
                        output_attentions=(a.mode == "attentions"))
            if a.mode == "attentions":
                kept.append(out.attentions)
            elif a.mode == "loss":
                kept.append(out.loss)
            elif a.mode == "preds":               # logits kept detached for an epoch metric
                kept.append(out.logits.detach())
            elif a.mode == "loss-item":
                kept.append(out.loss.item())
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 9. MoE
def job_moe(a):
    from transformers import MixtralConfig, MixtralForCausalLM
    torch.manual_seed(0)
    cfg = MixtralConfig(vocab_size=1000, hidden_size=256, intermediate_size=512, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, num_local_experts=8,
                        num_experts_per_tok=2, max_position_embeddings=256, tie_word_embeddings=False,
                        output_router_logits=True, router_aux_loss_coef=0.01)
    model = MixtralForCausalLM(cfg).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(0)
    with rec(a, model, opt):
        for step in range(a.steps):
            ids = torch.randint(0, 1000, (a.batch, 64), generator=g)
            out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 10. bf16 model / 11. clip+sched
def job_mlpdtype(a):
    torch.manual_seed(0)
    model = MLP(width=2048, depth=6, din=512)
    if a.mode == "bf16":
        model = model.to(torch.bfloat16)
    dt = next(model.parameters()).dtype
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(0)
    with rec(a, model, opt, name="mlpdtype"):
        for step in range(a.steps):
            x = torch.randn(a.batch, 512, generator=g).to(dt)
            y = torch.randint(0, 10, (a.batch,), generator=g)
            loss = F.cross_entropy(model(x).float(), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


def job_clip(a):
    torch.manual_seed(0)
    model = resnet18_small()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=max(a.steps, 2))
    g = torch.Generator().manual_seed(0)
    with rec(a, model, opt, name="clip"):
        for step in range(a.steps):
            x = torch.randn(a.batch, 3, 64, 64, generator=g)
            y = torch.randint(0, 10, (a.batch,), generator=g)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            if a.mode == "clip":
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            if a.mode == "clip":
                sched.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 12. dynamic padding
def job_pad(a):
    torch.manual_seed(0)
    model = bert_small(num_labels=2, maxpos=512)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rng = random.Random(0)
    g = torch.Generator().manual_seed(0)
    with rec(a, model, opt):
        for step in range(a.steps):
            lens = [rng.randint(16, 256) for _ in range(a.batch)]
            if a.mode.startswith("len"):          # every sequence exactly this long
                lens = [int(a.mode[3:])] * a.batch
            L = 256 if a.mode == "fixed" else max(lens)
            ids = torch.zeros(a.batch, L, dtype=torch.long)
            mask = torch.zeros(a.batch, L, dtype=torch.long)
            for i, n in enumerate(lens):
                ids[i, :n] = torch.randint(1, 2000, (n,), generator=g)
                mask[i, :n] = 1
            labels = torch.randint(0, 2, (a.batch,), generator=g)
            out = model(input_ids=ids, attention_mask=mask, labels=labels)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 13. checkpoint reentrant
class Block(nn.Module):
    def __init__(s, d=512, h=2048):
        super().__init__()
        s.ln = nn.LayerNorm(d)
        s.fc1 = nn.Linear(d, h)
        s.fc2 = nn.Linear(h, d)

    def forward(s, x):
        return x + s.fc2(F.gelu(s.fc1(s.ln(x))))


class Stack(nn.Module):
    def __init__(s, mode, n=8, d=512):
        super().__init__()
        s.mode = mode
        s.inp = nn.Linear(64, d)
        s.blocks = nn.ModuleList(Block(d) for _ in range(n))
        s.head = nn.Linear(d, 10)

    def forward(s, x):
        if s.mode == "raw-reentrant":
            h = x.unsqueeze(-1).expand(*x.shape, 8).reshape(x.shape[0], x.shape[1], -1)  # no grad input
            h = F.pad(h, (0, 512 - h.shape[-1]))
        else:
            h = s.inp(x)
        for b in s.blocks:
            if s.mode == "none":
                h = b(h)
            else:
                h = torch.utils.checkpoint.checkpoint(b, h, use_reentrant=(s.mode != "nonreentrant"))
        return s.head(h.mean(1))


def job_ckpt(a):
    torch.manual_seed(0)
    model = Stack(a.mode)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(0)
    with rec(a, model, opt, name="ckpt"):
        for step in range(a.steps):
            x = torch.randn(a.batch, 128, 64, generator=g)
            y = torch.randint(0, 10, (a.batch,), generator=g)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            if step == a.steps - 1:
                nog = [n for n, p in model.named_parameters() if p.grad is None]
                print("params given no gradient in the last step:", len(nog), "of",
                      len(list(model.parameters())), file=sys.stderr)
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 14. LSTM truncated BPTT
class LSTMLM(nn.Module):
    def __init__(s, vocab=2000, d=256, layers=2):
        super().__init__()
        s.emb = nn.Embedding(vocab, d)
        s.lstm = nn.LSTM(d, d, layers, batch_first=True)
        s.head = nn.Linear(d, vocab)

    def forward(s, ids, hidden=None):
        out, hidden = s.lstm(s.emb(ids), hidden)
        return s.head(out), hidden


def job_tbptt(a):
    torch.manual_seed(0)
    model = LSTMLM()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    g = torch.Generator().manual_seed(0)
    hidden = None
    with rec(a, model, opt):
        for step in range(a.steps):
            ids = torch.randint(0, 2000, (a.batch, 65), generator=g)
            if a.mode == "detach" and hidden is not None:
                hidden = tuple(h.detach() for h in hidden)
            logits, hidden = model(ids[:, :-1], hidden)
            loss = F.cross_entropy(logits.reshape(-1, 2000), ids[:, 1:].reshape(-1))
            # mode "nodetach": the classic bug, silenced with retain_graph=True
            loss.backward(retain_graph=(a.mode == "nodetach"))
            opt.step()
            opt.zero_grad(set_to_none=True)


JOBS = {"tbptt": job_tbptt, "t5": job_t5, "det": job_det, "gan": job_gan, "wgangp": job_wgangp, "ema": job_ema,
        "lora": job_lora, "hook": job_hook, "keep": job_keep, "moe": job_moe,
        "mlpdtype": job_mlpdtype, "clip": job_clip, "pad": job_pad, "ckpt": job_ckpt}

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("job", choices=sorted(JOBS))
    p.add_argument("--mode", default="clean")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("-o", "--output", default="r/out.json")
    p.add_argument("--variant", default=None)
    p.add_argument("--name", default=None)
    p.add_argument("--no-record", action="store_true")
    a = p.parse_args()
    JOBS[a.job](a)
