"""Independent jobs, session 65.

  python jobs.py --job JOB --batch B [--steps S] --mode record -o r/X.json [--variant V]
  python jobs.py --job JOB --batch B [--steps S] --mode count      # counting allocator, no memdiag
  python jobs.py --job JOB --batch B --mode params                 # print parameter counts only
"""
import argparse, json, os, time

p = argparse.ArgumentParser()
p.add_argument("--job", required=True)
p.add_argument("--batch", type=int, required=True)
p.add_argument("--steps", type=int, default=4)
p.add_argument("--mode", choices=["record", "count", "params"], default="count")
p.add_argument("-o", "--output", default=None)
p.add_argument("--variant", default=None)
p.add_argument("--opt", default=None)
p.add_argument("--rec-opts", default="{}")
a = p.parse_args()

ca = None
if a.mode == "count":
    from torch.utils.cpp_extension import load
    ca = load("countalloc_ind65", ["/work/main/docs/measurements/cpu/capacity-check-s62/countalloc.cpp"], verbose=False)
    ca.install()
import torch
import torch.nn as nn
import torch.nn.functional as F
torch.manual_seed(0)
MB = 1024 * 1024
ACCUM = 4
V = 8000
g = torch.Generator().manual_seed(1)
state = {}  # things the loop keeps across steps (leaks, EMA)


class GRULM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, 256)
        self.rnn = nn.GRU(256, 512, num_layers=2, batch_first=True)
        self.out = nn.Linear(512, V)

    def forward(self, ids):
        h, _ = self.rnn(self.emb(ids))
        return self.out(h)


class WideRec(nn.Module):  # wide embedding table + small tower: AdamW state dominant
    def __init__(self):
        super().__init__()
        self.table = nn.EmbeddingBag(400_000, 128, mode="mean")
        self.tower = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 1))

    def forward(self, idx, offsets):
        return self.tower(self.table(idx, offsets)).squeeze(-1)


class Critic(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 64, 4, 2, 1), nn.LeakyReLU(0.2),
            nn.Conv2d(64, 128, 4, 2, 1), nn.LeakyReLU(0.2),
            nn.Conv2d(128, 256, 4, 2, 1), nn.LeakyReLU(0.2),
            nn.Flatten(), nn.Linear(256 * 8 * 8, 1))

    def forward(self, x):
        return self.net(x)


class KwEncoder(nn.Module):  # keyword-only forward, dict batch
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, 256)
        layer = nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True, dropout=0.1)
        self.enc = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
        self.head = nn.Linear(256, 10)

    def forward(self, *, input_ids, attention_mask, labels=None):
        h = self.enc(self.emb(input_ids), src_key_padding_mask=attention_mask == 0)
        logits = self.head(h.mean(1))
        return {"loss": F.cross_entropy(logits, labels), "logits": logits}


def build(job):
    import torchvision
    if job == "convnext":
        m = torchvision.models.convnext_tiny(num_classes=100)
        return m, torch.optim.AdamW(m.parameters(), lr=1e-3)
    if job == "densenet_losssum":
        m = torchvision.models.densenet121(num_classes=100)
        return m, torch.optim.SGD(m.parameters(), lr=1e-2, momentum=0.9)
    if job == "gru":
        m = GRULM()
        return m, torch.optim.SGD(m.parameters(), lr=0.1)
    if job in ("widerec", "widerec_sgd"):
        m = WideRec()
        if job == "widerec_sgd" or a.opt == "sgd":
            return m, torch.optim.SGD(m.parameters(), lr=0.1)
        return m, torch.optim.AdamW(m.parameters(), lr=1e-3)
    if job == "gp":
        m = Critic()
        return m, torch.optim.Adam(m.parameters(), lr=1e-4, betas=(0.0, 0.9))
    if job in ("kwenc", "encaccum"):
        m = KwEncoder()
        return m, torch.optim.AdamW(m.parameters(), lr=1e-4)
    import transformers as T
    if job == "llama":
        m = T.LlamaForCausalLM(T.LlamaConfig(vocab_size=V, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                                             tie_word_embeddings=False))
        return m, torch.optim.AdamW(m.parameters(), lr=1e-4)
    if job == "roberta_keephs":
        m = T.RobertaForSequenceClassification(T.RobertaConfig(vocab_size=V, hidden_size=256, num_hidden_layers=4,
                                                               num_attention_heads=4, intermediate_size=1024,
                                                               max_position_embeddings=260, num_labels=3))
        return m, torch.optim.AdamW(m.parameters(), lr=1e-4)
    if job == "distil_frozen":
        m = T.DistilBertForSequenceClassification(T.DistilBertConfig(vocab_size=30522, dim=768, hidden_dim=3072, n_layers=6,
                                                                     n_heads=12, num_labels=5))
        for q in m.distilbert.parameters():
            q.requires_grad_(False)
        return m, torch.optim.AdamW([q for q in m.parameters() if q.requires_grad], lr=1e-3)
    if job == "mistral_ema":
        m = T.MistralForCausalLM(T.MistralConfig(vocab_size=V, hidden_size=512, intermediate_size=1536, num_hidden_layers=4,
                                                 num_attention_heads=8, num_key_value_heads=2, max_position_embeddings=512,
                                                 tie_word_embeddings=False, sliding_window=64))
        state["ema"] = torch.optim.swa_utils.AveragedModel(m, multi_avg_fn=torch.optim.swa_utils.get_ema_multi_avg_fn(0.999))
        return m, torch.optim.SGD(m.parameters(), lr=1e-3)
    raise SystemExit("unknown job " + job)


model, opt = build(a.job)
model.train()
if a.mode == "params":
    n = sum(q.numel() for q in model.parameters()); nt = sum(q.numel() for q in model.parameters() if q.requires_grad)
    print(json.dumps({"job": a.job, "params_M": n / 1e6, "params_MiB": n * 4 / MB, "trainable_MiB": nt * 4 / MB}))
    raise SystemExit


def one_step(step):
    j = a.job
    B = a.batch
    if j == "convnext":
        x = torch.randn(B, 3, 64, 64, generator=g); y = torch.randint(0, 100, (B,), generator=g)
        loss = F.cross_entropy(model(x), y); loss.backward()
    elif j == "densenet_losssum":  # BUG: running sum of the loss without detach/item
        x = torch.randn(B, 3, 64, 64, generator=g); y = torch.randint(0, 100, (B,), generator=g)
        loss = F.cross_entropy(model(x), y); loss.backward()
        state["running"] = state.get("running", 0) + loss
    elif j == "gru":
        ids = torch.randint(0, V, (B, 129), generator=g)
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, V), ids[:, 1:].reshape(-1)); loss.backward()
    elif j in ("widerec", "widerec_sgd"):
        idx = torch.randint(0, 400_000, (B * 20,), generator=g); offsets = torch.arange(0, B * 20, 20)
        y = torch.rand(B, generator=g)
        loss = F.binary_cross_entropy_with_logits(model(idx, offsets), y); loss.backward()
    elif j == "gp":  # WGAN-GP critic step: gradient penalty with create_graph
        real = torch.randn(B, 3, 64, 64, generator=g); fake = torch.randn(B, 3, 64, 64, generator=g)
        eps = torch.rand(B, 1, 1, 1, generator=g)
        xh = (eps * real + (1 - eps) * fake).requires_grad_(not os.environ.get("XNOGRAD"))
        if os.environ.get("ONEFWD"):
            loss = model(xh).mean(); loss.backward(); opt.step(); opt.zero_grad(set_to_none=True); return float(loss)
        dh = model(xh)
        if os.environ.get("NOGP"):
            gp = dh.mean() * 0
        else:
            gr, = torch.autograd.grad(dh.sum(), xh, create_graph=True)
            gp = ((gr.flatten(1).norm(2, dim=1) - 1) ** 2).mean()
        loss = model(fake).mean() - model(real).mean() + 10 * gp
        loss.backward()
    elif j == "kwenc":
        batch = {"input_ids": torch.randint(0, V, (B, 128), generator=g), "attention_mask": torch.ones(B, 128, dtype=torch.long),
                 "labels": torch.randint(0, 10, (B,), generator=g)}
        loss = model(**batch)["loss"]; loss.backward()
    elif j == "encaccum":
        mb = B // ACCUM; assert mb * ACCUM == B
        for _ in range(ACCUM):
            batch = {"input_ids": torch.randint(0, V, (mb, 128), generator=g), "attention_mask": torch.ones(mb, 128, dtype=torch.long),
                     "labels": torch.randint(0, 10, (mb,), generator=g)}
            loss = model(**batch)["loss"] / ACCUM; loss.backward()
    elif j == "llama":
        ids = torch.randint(0, V, (B, 256), generator=g)
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids); loss = out.loss; loss.backward()
    elif j == "roberta_keephs":  # BUG: keeps every step's hidden states (with their graph) for "analysis"
        ids = torch.randint(3, V, (B, 128), generator=g)
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=torch.randint(0, 3, (B,), generator=g),
                    output_hidden_states=True)
        state.setdefault("hs", []).append(out.hidden_states)
        loss = out.loss; loss.backward()
    elif j == "distil_frozen":
        ids = torch.randint(0, 30522, (B, 128), generator=g)
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=torch.randint(0, 5, (B,), generator=g))
        loss = out.loss; loss.backward()
    elif j == "mistral_ema":
        ids = torch.randint(0, V, (B, 128), generator=g)
        loss = model(input_ids=ids, labels=ids).loss; loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    if j == "mistral_ema":
        state["ema"].update_parameters(model)
    return float(loss)


t0 = time.time()
res = {"job": a.job, "batch": a.batch, "steps": a.steps, "mode": a.mode}
if a.mode == "record":
    import memdiag
    kw = {}
    kw.update(json.loads(a.rec_opts))
    if a.variant:
        kw["variant"] = a.variant
    with memdiag.record(model, opt, output=a.output, name=a.job, **kw):
        for s in range(a.steps):
            one_step(s)
else:
    res["before_loop_mib"] = round(ca.current() / MB, 3); ca.reset_peak()
    steps = []
    for s in range(a.steps):
        ca.reset_peak(); one_step(s); steps.append(ca.peak() / MB)
    res["step_peaks_mib"] = [round(v, 3) for v in steps]
    res["peak_mib"] = round(max(steps), 3)
res["seconds"] = round(time.time() - t0, 2)
print(json.dumps(res))
