"""python jobs.py --job J --batch B [--steps S] --mode record|count [-o r/x.json]"""
import argparse, json, os, time
p = argparse.ArgumentParser()
p.add_argument("--job", required=True); p.add_argument("--batch", type=int, required=True)
p.add_argument("--steps", type=int, default=3); p.add_argument("--mode", choices=["record", "count"], default="count")
p.add_argument("-o", "--output", default=None)
a = p.parse_args()
ca = None
if a.mode == "count":
    from torch.utils.cpp_extension import load
    ca = load("countalloc_s63i", ["/work/main/docs/measurements/cpu/capacity-check-s62/countalloc.cpp"], verbose=False)
    ca.install()
import torch, torch.nn as nn, torch.nn.functional as F
torch.manual_seed(0)
MB = 1024 * 1024

class Block(nn.Module):
    def __init__(s, i, o):
        super().__init__(); s.c = nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(),
                                                nn.Conv2d(o, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())
    def forward(s, x): return s.c(x)

class UNet(nn.Module):
    def __init__(s, ch=(32, 64, 128, 256), ncls=8):
        super().__init__()
        s.d = nn.ModuleList(); c0 = 3
        for c in ch: s.d.append(Block(c0, c)); c0 = c
        s.u = nn.ModuleList()
        for c in reversed(ch[:-1]): s.u.append(Block(c0 + c, c)); c0 = c
        s.out = nn.Conv2d(c0, ncls, 1)
    def forward(s, x):
        skips = []
        for i, b in enumerate(s.d):
            x = b(x)
            if i < len(s.d) - 1: skips.append(x); x = F.max_pool2d(x, 2)
        for b in s.u:
            x = F.interpolate(x, scale_factor=2, mode="nearest"); x = b(torch.cat([x, skips.pop()], 1))
        return s.out(x)

class MixerLayer(nn.Module):
    def __init__(s, n, d, tok, chn):
        super().__init__(); s.n1 = nn.LayerNorm(d); s.n2 = nn.LayerNorm(d)
        s.t = nn.Sequential(nn.Linear(n, tok), nn.GELU(), nn.Linear(tok, n))
        s.c = nn.Sequential(nn.Linear(d, chn), nn.GELU(), nn.Linear(chn, d))
    def forward(s, x):
        x = x + s.t(s.n1(x).transpose(1, 2)).transpose(1, 2)
        return x + s.c(s.n2(x))

class Mixer(nn.Module):
    def __init__(s, img=64, patch=8, d=256, depth=6, tok=128, chn=1024, ncls=100):
        super().__init__(); n = (img // patch) ** 2
        s.stem = nn.Conv2d(3, d, patch, patch); s.layers = nn.Sequential(*[MixerLayer(n, d, tok, chn) for _ in range(depth)])
        s.norm = nn.LayerNorm(d); s.head = nn.Linear(d, ncls)
    def forward(s, x):
        x = s.stem(x).flatten(2).transpose(1, 2)
        return s.head(s.norm(s.layers(x)).mean(1))

def audio():
    L = [nn.Conv1d(1, 64, 10, 5), nn.BatchNorm1d(64), nn.GELU()]
    c = 64
    for o in (64, 128, 128, 256, 256):
        L += [nn.Conv1d(c, o, 3, 2, padding=1), nn.BatchNorm1d(o), nn.GELU()]; c = o
    L += [nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(c, 35)]
    return nn.Sequential(*L)

def build(job):
    import torchvision
    if job == "swin": m = torchvision.models.swin_t(num_classes=100)
    elif job == "regnet": m = torchvision.models.regnet_y_400mf(num_classes=100)
    elif job == "unet": m = UNet()
    elif job == "mixer": m = Mixer()
    elif job == "audio":
        m = audio(); return m, torch.optim.RMSprop(m.parameters(), lr=1e-3, momentum=0.9)
    elif job == "deberta":
        import transformers as T
        m = T.DebertaV2ForSequenceClassification(T.DebertaV2Config(vocab_size=8000, hidden_size=256, num_hidden_layers=4,
            num_attention_heads=4, intermediate_size=1024, max_position_embeddings=512, relative_attention=True,
            pos_att_type=["c2p", "p2c"], position_buckets=64, num_labels=5))
    elif job == "phi":
        import transformers as T
        m = T.PhiForCausalLM(T.PhiConfig(vocab_size=8000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
            intermediate_size=1024, max_position_embeddings=512))
    else: raise SystemExit(job)
    return m, torch.optim.AdamW(m.parameters(), lr=1e-3)

model, opt = build(a.job); model.train()
g = torch.Generator().manual_seed(1)

def one_step(step):
    j, B = a.job, a.batch
    if j in ("swin", "regnet", "mixer"):
        x = torch.randn(B, 3, 64, 64, generator=g); y = torch.randint(0, 100, (B,), generator=g)
        loss = F.cross_entropy(model(x), y)
    elif j == "unet":
        x = torch.randn(B, 3, 64, 64, generator=g); y = torch.randint(0, 8, (B, 64, 64), generator=g)
        loss = F.cross_entropy(model(x), y)
    elif j == "audio":
        x = torch.randn(B, 1, 16000, generator=g); y = torch.randint(0, 35, (B,), generator=g)
        loss = F.cross_entropy(model(x), y)
    elif j == "deberta":
        ids = torch.randint(1, 8000, (B, 128), generator=g); y = torch.randint(0, 5, (B,), generator=g)
        loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=y).loss
    elif j == "phi":
        ids = torch.randint(0, 8000, (B, 128), generator=g)
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
    return float(loss)

t0 = time.time()
res = {"job": a.job, "batch": a.batch, "steps": a.steps, "mode": a.mode}
if a.mode == "record":
    import memdiag
    with memdiag.record(model, opt, output=a.output, name=a.job):
        for s in range(a.steps): one_step(s)
else:
    res["before_loop_mib"] = round(ca.current() / MB, 3); steps = []
    for s in range(a.steps):
        ca.reset_peak(); one_step(s); steps.append(ca.peak() / MB)
    res["step_peaks_mib"] = [round(v, 3) for v in steps]; res["peak_mib"] = round(max(steps), 3)
res["seconds"] = round(time.time() - t0, 2)
print(json.dumps(res), flush=True)
