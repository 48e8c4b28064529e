"""Independent jobs for memdiag (session 61), CPU.

python jobs.py --job NAME [--batch B] [--steps N] -o REPORT
Every model is built from a configuration with random weights; nothing is downloaded.
"""
import argparse
import collections
import copy
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--job", required=True)
p.add_argument("--batch", type=int, default=None)
p.add_argument("--steps", type=int, default=6)
p.add_argument("--accum", type=int, default=8)
p.add_argument("--sum", type=int, default=0, help="twoloss: (l1+l2).backward() control")
p.add_argument("--keep", default="loss", help="deque3: loss|feat")
p.add_argument("--norec", action="store_true", help="print parameter counts only")
p.add_argument("-o", "--output", default=None)
a = p.parse_args()
torch.manual_seed(0)
random.seed(0)

if not a.norec:
    import memdiag


def mib(n_floats):
    return n_floats * 4 / 2**20


def nparams(*ms):
    return sum(p.numel() for m in ms for p in m.parameters())


def rec(model, opt, **kw):
    return memdiag.record(model, opt, output=a.output, name=a.job, steps=a.steps, **kw)


def mlp(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


# 1 ------------------------------------------------------------ LBFGS closure
def lbfgs():
    model = mlp([1024, 1024, 1024, 10])
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=1, history_size=20)
    if a.norec:
        return print("lbfgs params", nparams(model), mib(nparams(model)))
    B = a.batch or 32
    with rec(model, opt):
        for s in range(a.steps):
            x = torch.randn(B, 1024)
            y = torch.randint(0, 10, (B,))

            def closure():
                opt.zero_grad()
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                return loss

            opt.step(closure)


# 2 ------------------------------------------------------------ GAN (DCGAN-style order)
def gan():
    G = mlp([128, 1024, 1024, 3072])
    D = mlp([3072, 1024, 1024, 1])
    opt_g = torch.optim.Adam(G.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(D.parameters(), lr=2e-4, betas=(0.5, 0.999))
    if a.norec:
        return print("gan params G", nparams(G), mib(nparams(G)), "D", nparams(D), mib(nparams(D)))
    B = a.batch or 64
    crit = nn.BCEWithLogitsLoss()
    with memdiag.record(G, [opt_d, opt_g], output=a.output, name=a.job, steps=a.steps):
        for s in range(a.steps):
            real = torch.randn(B, 3072)
            # discriminator: real, then fake (DCGAN tutorial order)
            D.zero_grad()
            out = D(real).view(-1)
            errD_real = crit(out, torch.ones(B))
            errD_real.backward()
            z = torch.randn(B, 128)
            fake = G(z)
            out = D(fake.detach()).view(-1)
            errD_fake = crit(out, torch.zeros(B))
            errD_fake.backward()
            opt_d.step()
            # generator
            G.zero_grad()
            out = D(fake).view(-1)
            errG = crit(out, torch.ones(B))
            errG.backward()
            opt_g.step()


# 3 ------------------------------------------------------------ EMA copy of a wide model
def ema():
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
    model = mlp([2048, 2048, 2048, 2048, 2048, 10])
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    ema_model = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))
    if a.norec:
        return print("ema params", nparams(model), mib(nparams(model)), "ema copy", nparams(ema_model))
    B = a.batch or 32
    with rec(model, opt):
        for s in range(a.steps):
            x = torch.randn(B, 2048)
            y = torch.randint(0, 10, (B,))
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            ema_model.update_parameters(model)


# 4 ------------------------------------------------------------ HF llama, accumulation of 8, **batch
def llama_accum():
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=16000, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256,
                      tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if a.norec:
        return print("llama params", nparams(model), mib(nparams(model)))
    B = a.batch or 2
    T = 64
    with rec(model, opt):
        for s in range(a.steps):
            for m in range(a.accum):
                ids = torch.randint(0, 16000, (B, T))
                batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}
                loss = model(**batch).loss / a.accum
                loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# 5 ------------------------------------------------------------ Mixtral MoE
def mixtral():
    from transformers import MixtralConfig, MixtralForCausalLM
    cfg = MixtralConfig(vocab_size=4000, hidden_size=128, intermediate_size=1024, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, num_local_experts=8,
                        num_experts_per_tok=2, max_position_embeddings=256, tie_word_embeddings=False)
    model = MixtralForCausalLM(cfg).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if a.norec:
        return print("mixtral params", nparams(model), mib(nparams(model)))
    B = a.batch or 4
    T = 64
    with rec(model, opt):
        for s in range(a.steps):
            ids = torch.randint(0, 4000, (B, T))
            out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# 6 ------------------------------------------------------------ LSTM LM, packed, varying length and batch
class LSTMLM(nn.Module):
    def __init__(self, V=8000, E=128, H=256):
        super().__init__()
        self.emb = nn.Embedding(V, E)
        self.lstm = nn.LSTM(E, H, num_layers=2, batch_first=True)
        self.out = nn.Linear(H, V)

    def forward(self, packed_ids):
        from torch.nn.utils.rnn import PackedSequence
        emb = PackedSequence(self.emb(packed_ids.data), packed_ids.batch_sizes,
                             packed_ids.sorted_indices, packed_ids.unsorted_indices)
        h, _ = self.lstm(emb)
        return self.out(h.data)


def lstm():
    from torch.nn.utils.rnn import pack_sequence
    model = LSTMLM()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    if a.norec:
        return print("lstm params", nparams(model), mib(nparams(model)))
    B = a.batch or 32
    rng = random.Random(1)
    with rec(model, opt):
        for s in range(a.steps):
            b = rng.randint(B * 3 // 4, B * 5 // 4)
            seqs = [torch.randint(0, 8000, (rng.randint(30, 70),)) for _ in range(b)]
            packed = pack_sequence(seqs, enforce_sorted=False)
            tgt = pack_sequence([torch.roll(q, -1) for q in seqs], enforce_sorted=False)
            logits = model(packed)
            loss = F.cross_entropy(logits, tgt.data)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()


# 7 ------------------------------------------------------------ two losses, two backward calls
class TwoHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(),
                                   nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
                                   nn.Conv2d(32, 64, 3, padding=1, stride=2), nn.ReLU(),
                                   nn.Conv2d(64, 64, 3, padding=1), nn.ReLU())
        self.cls = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))
        self.seg = nn.Conv2d(64, 5, 1)

    def forward(self, x):
        h = self.trunk(x)
        return self.cls(h), self.seg(h)


def twoloss():
    model = TwoHead()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    if a.norec:
        return print("twoloss params", nparams(model), mib(nparams(model)))
    B = a.batch or 16
    with rec(model, opt):
        for s in range(a.steps):
            x = torch.randn(B, 3, 64, 64)
            yc = torch.randint(0, 10, (B,))
            ys = torch.randint(0, 5, (B, 32, 32))
            c, sg = model(x)
            l1 = F.cross_entropy(c, yc)
            l2 = F.cross_entropy(sg, ys)
            if a.sum:
                (l1 + l2).backward()
            else:
                l1.backward(retain_graph=True)
                l2.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# 8 ------------------------------------------------------------ bounded deque of the last 3 losses
def deque3():
    model = TwoHead()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    if a.norec:
        return print("deque3 params", nparams(model), mib(nparams(model)))
    B = a.batch or 16
    recent = collections.deque(maxlen=3)
    with rec(model, opt):
        for s in range(a.steps):
            x = torch.randn(B, 3, 64, 64)
            ys = torch.randint(0, 5, (B, 32, 32))
            h = model.trunk(x) if a.keep == "feat" else None
            c, sg = model(x)
            loss = F.cross_entropy(sg, ys) + 0.0 * c.sum()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            recent.append(loss if a.keep == "loss" else h)  # graph-connected, bounded to 3
            if s % 2 == 0 and a.keep == "loss":
                _ = sum(l.item() for l in recent) / len(recent)


# 9a ----------------------------------------------------------- RMSprop centered+momentum, set_to_none=False
def rmsprop():
    model = mlp([2048, 2048, 2048, 2048, 2048, 10])
    opt = torch.optim.RMSprop(model.parameters(), lr=1e-4, momentum=0.9, centered=True)
    if a.norec:
        return print("rmsprop params", nparams(model), mib(nparams(model)))
    B = a.batch or 32
    with rec(model, opt):
        for s in range(a.steps):
            x = torch.randn(B, 2048)
            y = torch.randint(0, 10, (B,))
            opt.zero_grad(set_to_none=False)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()


# 9b ----------------------------------------------------------- SGD momentum, set_to_none=False
def sgdmom():
    model = mlp([2048, 2048, 2048, 2048, 2048, 10])
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    if a.norec:
        return print("sgdmom params", nparams(model), mib(nparams(model)))
    B = a.batch or 32
    with rec(model, opt):
        for s in range(a.steps):
            x = torch.randn(B, 2048)
            y = torch.randint(0, 10, (B,))
            opt.zero_grad(set_to_none=False)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()


# 10 ----------------------------------------------------------- Trainer-like loop: scheduler, clipping
def hfloop():
    from transformers import DistilBertConfig, DistilBertForSequenceClassification, get_linear_schedule_with_warmup
    cfg = DistilBertConfig(vocab_size=30522, dim=256, hidden_dim=1024, n_layers=4, n_heads=4,
                           max_position_embeddings=256, num_labels=3)
    model = DistilBertForSequenceClassification(cfg).train()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01)
    sched = get_linear_schedule_with_warmup(opt, 2, 100)
    if a.norec:
        return print("distilbert params", nparams(model), mib(nparams(model)))
    B = a.batch or 8
    T = 64
    with rec(model, opt):
        for s in range(a.steps):
            ids = torch.randint(0, 30522, (B, T))
            batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                     "labels": torch.randint(0, 3, (B,))}
            out = model(**batch)
            out.loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()


# 10b ---------------------------------------------------------- the actual transformers Trainer
def trainer():
    from transformers import (DistilBertConfig, DistilBertForSequenceClassification, Trainer,
                              TrainingArguments, get_linear_schedule_with_warmup)
    cfg = DistilBertConfig(vocab_size=30522, dim=256, hidden_dim=1024, n_layers=4, n_heads=4,
                           max_position_embeddings=256, num_labels=3)
    model = DistilBertForSequenceClassification(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01)
    sched = get_linear_schedule_with_warmup(opt, 2, 100)
    if a.norec:
        return print("distilbert params", nparams(model), mib(nparams(model)))
    B = a.batch or 8
    T = 64
    g = torch.Generator().manual_seed(0)
    data = [{"input_ids": torch.randint(0, 30522, (T,), generator=g),
             "attention_mask": torch.ones(T, dtype=torch.long),
             "labels": torch.randint(0, 3, (), generator=g)} for _ in range(B * a.steps)]
    args = TrainingArguments(output_dir="/tmp/s61-trainer", per_device_train_batch_size=B, max_steps=a.steps,
                             report_to=[], logging_steps=1000, save_strategy="no", use_cpu=True,
                             max_grad_norm=1.0, dataloader_num_workers=0, disable_tqdm=True)
    tr = Trainer(model=model, args=args, train_dataset=data, optimizers=(opt, sched))
    with rec(model, opt):
        tr.train()


JOBS = dict(lbfgs=lbfgs, gan=gan, ema=ema, llama_accum=llama_accum, mixtral=mixtral, lstm=lstm,
            twoloss=twoloss, deque3=deque3, rmsprop=rmsprop, sgdmom=sgdmom, hfloop=hfloop, trainer=trainer)
JOBS[a.job]()
