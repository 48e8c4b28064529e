"""Independent test jobs for memdiag's Python recorder (round s61b).

python jobs.py --job NAME [--batch N] [--steps N] [--variant V] [--size PX] -o r/NAME.json
"""
import argparse
import math
import random
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import memdiag


def det(args):
    from torchvision.models.detection import fasterrcnn_mobilenet_v3_large_fpn
    model = fasterrcnn_mobilenet_v3_large_fpn(weights=None, weights_backbone=None, num_classes=5,
                                              min_size=320, max_size=480)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    rng = random.Random(0)

    def batch():
        imgs, tgts = [], []
        for _ in range(args.batch):
            h, w = rng.randint(240, 480), rng.randint(240, 480)
            imgs.append(torch.rand(3, h, w))
            boxes = []
            for _ in range(3):
                x0, y0 = rng.uniform(0, w / 2), rng.uniform(0, h / 2)
                boxes.append([x0, y0, x0 + rng.uniform(20, w / 2), y0 + rng.uniform(20, h / 2)])
            tgts.append({"boxes": torch.tensor(boxes), "labels": torch.randint(1, 5, (3,))})
        return imgs, tgts

    with memdiag.record(model, opt, output=args.o, name="det", preset="px240-480", variant=args.variant):
        for _ in range(args.steps):
            imgs, tgts = batch()
            losses = model(imgs, tgts)
            loss = sum(losses.values())
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


def seg(args):
    from torchvision.models.segmentation import deeplabv3_mobilenet_v3_large
    model = deeplabv3_mobilenet_v3_large(weights=None, weights_backbone=None, num_classes=21, aux_loss=True)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    with memdiag.record(model, opt, output=args.o, name="seg", preset=f"px{args.size}", variant=args.variant):
        for _ in range(args.steps):
            x = torch.rand(args.batch, 3, args.size, args.size)
            y = torch.randint(0, 21, (args.batch, args.size, args.size))
            out = model(x)
            loss = F.cross_entropy(out["out"], y) + 0.4 * F.cross_entropy(out["aux"], y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


class Block(nn.Module):
    def __init__(self, cin, cout, tdim):
        super().__init__()
        self.n1 = nn.GroupNorm(8, cin)
        self.c1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.t = nn.Linear(tdim, cout)
        self.n2 = nn.GroupNorm(8, cout)
        self.c2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x, temb):
        h = self.c1(F.silu(self.n1(x)))
        h = h + self.t(temb)[:, :, None, None]
        h = self.c2(F.silu(self.n2(h)))
        return h + self.skip(x)


class UNet(nn.Module):
    def __init__(self, ch=(64, 128, 256), tdim=256, ckpt=False):
        super().__init__()
        self.ckpt = ckpt
        self.tdim = tdim
        self.tmlp = nn.Sequential(nn.Linear(tdim, tdim), nn.SiLU(), nn.Linear(tdim, tdim))
        self.inc = nn.Conv2d(3, ch[0], 3, padding=1)
        self.down = nn.ModuleList()
        c = ch[0]
        for co in ch:
            self.down.append(Block(c, co, tdim))
            c = co
        self.mid = Block(c, c, tdim)
        self.up = nn.ModuleList()
        for co in reversed(ch):
            self.up.append(Block(c + co, co, tdim))
            c = co
        self.out = nn.Conv2d(c, 3, 3, padding=1)

    def temb(self, t):
        half = self.tdim // 2
        f = torch.exp(-math.log(10000) * torch.arange(half, dtype=torch.float32) / half)
        a = t.float()[:, None] * f[None]
        return self.tmlp(torch.cat([a.sin(), a.cos()], 1))

    def run(self, blk, x, te):
        if self.ckpt:
            from torch.utils.checkpoint import checkpoint
            return checkpoint(blk, x, te, use_reentrant=False)
        return blk(x, te)

    def forward(self, x, t):
        te = self.temb(t)
        h = self.inc(x)
        skips = []
        for i, b in enumerate(self.down):
            h = self.run(b, h, te)
            skips.append(h)
            if i < len(self.down) - 1:
                h = F.avg_pool2d(h, 2)
        h = self.run(self.mid, h, te)
        for i, b in enumerate(self.up):
            s = skips.pop()
            if h.shape[-1] != s.shape[-1]:
                h = F.interpolate(h, scale_factor=2, mode="nearest")
            h = self.run(b, torch.cat([h, s], 1), te)
        return self.out(h)


def diffusion(args):
    model = UNet(ckpt=args.variant == "checkpointing")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    betas = torch.linspace(1e-4, 0.02, 1000)
    abar = torch.cumprod(1 - betas, 0)
    with memdiag.record(model, opt, output=args.o, name="diffusion", preset="px64", variant=args.variant):
        for _ in range(args.steps):
            x0 = torch.rand(args.batch, 3, 64, 64) * 2 - 1
            t = torch.randint(0, 1000, (args.batch,))
            noise = torch.randn_like(x0)
            a = abar[t][:, None, None, None]
            xt = a.sqrt() * x0 + (1 - a).sqrt() * noise
            with torch.autocast("cpu", dtype=torch.bfloat16):
                pred = model(xt, t)
                loss = F.mse_loss(pred.float(), noise)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)


def bart_gen(args):
    import transformers
    cfg = transformers.BartConfig(vocab_size=8000, d_model=256, encoder_layers=2, decoder_layers=2,
                                  encoder_attention_heads=4, decoder_attention_heads=4,
                                  encoder_ffn_dim=1024, decoder_ffn_dim=1024, max_position_embeddings=256)
    torch.manual_seed(0)
    model = transformers.BartForConditionalGeneration(cfg)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5)
    samples = []
    with memdiag.record(model, opt, output=args.o, name="bart_gen", preset="len64", variant=args.variant):
        for step in range(args.steps):
            src = torch.randint(4, 8000, (args.batch, 64))
            tgt = torch.randint(4, 8000, (args.batch, 64))
            out = model(input_ids=src, attention_mask=torch.ones_like(src), labels=tgt)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if step % 2 == 1:
                model.eval()
                if args.variant == "no_nograd":
                    gen = model.generate(src[:4], max_new_tokens=16, num_beams=1, do_sample=False)
                else:
                    with torch.no_grad():
                        gen = model.generate(src[:4], max_new_tokens=16, num_beams=1, do_sample=False)
                samples.append(gen.tolist())
                model.train()


def simclr(args):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 256))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    tau = 0.1
    with memdiag.record(model, opt, output=args.o, name="simclr", preset="mlp512", variant=args.variant):
        for _ in range(args.steps):
            base = torch.randn(args.batch, 512)
            v1 = base + 0.1 * torch.randn_like(base)
            v2 = base + 0.1 * torch.randn_like(base)
            z = F.normalize(model(torch.cat([v1, v2])), dim=1)
            n = z.shape[0]
            sim = z @ z.t() / tau
            sim = sim.masked_fill(torch.eye(n, dtype=torch.bool), float("-inf"))
            labels = torch.cat([torch.arange(args.batch, n), torch.arange(0, args.batch)])
            loss = F.cross_entropy(sim, labels)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


def wide_mlp():
    layers = []
    d_in = 512
    for _ in range(4):
        layers += [nn.Linear(d_in, 2048), nn.GELU()]
        d_in = 2048
    layers += [nn.Linear(2048, 10)]
    return nn.Sequential(*layers)


def clip_bf16(args, compiled=False):
    torch.manual_seed(0)
    model = wide_mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    run = torch.compile(model) if compiled else model
    name = "compile" if compiled else "clip_bf16"
    with memdiag.record(run, opt, output=args.o, name=name, preset="w2048", variant=args.variant):
        for _ in range(args.steps):
            x = torch.randn(args.batch, 512)
            y = torch.randint(0, 10, (args.batch,))
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(run(x).float(), y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad(set_to_none=True)


class Rec(nn.Module):
    def __init__(self, sparse):
        super().__init__()
        self.users = nn.Embedding(2_000_000, 64, sparse=sparse)
        self.items = nn.Embedding(100_000, 64, sparse=sparse)
        self.bias = nn.Linear(64, 1)

    def forward(self, u, i):
        return (self.users(u) * self.items(i)).sum(1) + self.bias(self.items(i)).squeeze(1)


def embed(args, sparse=False):
    torch.manual_seed(0)
    model = Rec(sparse)
    if sparse:
        opts = [torch.optim.SparseAdam([model.users.weight, model.items.weight], lr=1e-3),
                torch.optim.Adam(model.bias.parameters(), lr=1e-3)]
    else:
        opts = torch.optim.Adam(model.parameters(), lr=1e-3)
    name = "embed_sparse" if sparse else "embed"
    with memdiag.record(model, opts, output=args.o, name=name, preset="u2M", variant=args.variant):
        for _ in range(args.steps):
            u = torch.randint(0, 2_000_000, (args.batch,))
            i = torch.randint(0, 100_000, (args.batch,))
            y = torch.randint(0, 2, (args.batch,)).float()
            loss = F.binary_cross_entropy_with_logits(model(u, i), y)
            loss.backward()
            for o in (opts if isinstance(opts, list) else [opts]):
                o.step()
            for o in (opts if isinstance(opts, list) else [opts]):
                o.zero_grad(set_to_none=True)


def keep(args, detach):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 4096))
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    history = []
    name = "keep_detach" if detach else "keep_item"
    with memdiag.record(model, opt, output=args.o, name=name, preset="mlp4096", variant=args.variant):
        for _ in range(args.steps):
            x = torch.randn(args.batch, 256)
            y = torch.randint(0, 4096, (args.batch,))
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if detach:
                history.append(logits.detach())   # kept for a later metric: a leak of tensors
            else:
                history.append(loss.item())


class MaskMix(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(1000, 64)
        self.proj = nn.Linear(64, 64)
        self.head = nn.Linear(64, 1000)
        self._masks = {}

    def mask(self, L):
        if L not in self._masks:
            m = torch.tril(torch.ones(L, L))
            self._masks[L] = m / m.sum(1, keepdim=True)
        return self._masks[L]

    def forward(self, ids):
        x = self.emb(ids)
        x = torch.matmul(self.mask(ids.shape[1]), self.proj(x))
        return self.head(F.gelu(x))


def mask_cache(args):
    torch.manual_seed(0)
    rng = random.Random(0)
    model = MaskMix()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with memdiag.record(model, opt, output=args.o, name="mask_cache", preset="L1024-2048", variant=args.variant):
        for _ in range(args.steps):
            L = rng.randint(1024, 2048)
            ids = torch.randint(0, 1000, (args.batch, L))
            logits = model(ids)
            loss = F.cross_entropy(logits.reshape(-1, 1000), ids.reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


class Clip(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv3d(3, 8, kernel_size=(2, 8, 8), stride=(2, 8, 8))
        self.body = nn.Sequential(nn.ReLU(), nn.Conv3d(8, 16, 3, padding=1), nn.ReLU(),
                                  nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(16, 10))

    def forward(self, x):
        return self.body(self.stem(x))


def bigin(args):
    torch.manual_seed(0)
    model = Clip()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with memdiag.record(model, opt, output=args.o, name="bigin", preset="t16px112", variant=args.variant):
        for _ in range(args.steps):
            x = torch.randn(args.batch, 3, 16, 112, 112)
            y = torch.randint(0, 10, (args.batch,))
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


def gp(args):
    torch.manual_seed(0)
    critic = nn.Sequential(nn.Linear(256, 1024), nn.LeakyReLU(0.2), nn.Linear(1024, 1024), nn.LeakyReLU(0.2),
                           nn.Linear(1024, 1))
    opt = torch.optim.Adam(critic.parameters(), lr=1e-4, betas=(0.5, 0.9))
    with memdiag.record(critic, opt, output=args.o, name="gp", preset="mlp1024", variant=args.variant):
        for _ in range(args.steps):
            real = torch.randn(args.batch, 256)
            fake = torch.randn(args.batch, 256)
            eps = torch.rand(args.batch, 1)
            inter = (eps * real + (1 - eps) * fake).requires_grad_(True)
            d_inter = critic(inter)
            g, = torch.autograd.grad(d_inter.sum(), inter, create_graph=True)
            penalty = ((g.norm(2, dim=1) - 1) ** 2).mean()
            loss = critic(fake).mean() - critic(real).mean() + 10 * penalty
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


def progressive(args):
    torch.manual_seed(0)
    chans = [3, 32, 64, 128, 256]
    layers = []
    for a, b in zip(chans, chans[1:]):
        layers += [nn.Conv2d(a, b, 3, padding=1), nn.BatchNorm2d(b), nn.ReLU(), nn.MaxPool2d(2)]
    model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(256, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with memdiag.record(model, opt, output=args.o, name="progressive", preset="px128+16", variant=args.variant):
        for step in range(args.steps):
            side = 128 + 16 * step
            x = torch.randn(args.batch, 3, side, side)
            y = torch.randint(0, 10, (args.batch,))
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


JOBS = {
    "progressive": progressive,
    "bigin": bigin, "gp": gp,
    "det": det, "seg": seg, "diffusion": diffusion, "bart_gen": bart_gen, "simclr": simclr,
    "clip_bf16": clip_bf16, "compile": lambda a: clip_bf16(a, True),
    "embed": embed, "embed_sparse": lambda a: embed(a, True),
    "keep_item": lambda a: keep(a, False), "keep_detach": lambda a: keep(a, True),
    "mask_cache": mask_cache,
}

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--job", required=True, choices=sorted(JOBS))
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--variant", default=None)
    p.add_argument("-o", required=True)
    a = p.parse_args()
    torch.manual_seed(0)
    t0 = time.time()
    JOBS[a.job](a)
    print(f"{a.job} batch={a.batch} steps={a.steps} variant={a.variant} -> {a.o} in {time.time() - t0:.1f}s")
