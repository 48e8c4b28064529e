"""Training jobs that hold memory besides the model's weights, gradients and optimizer state.

Independent test of memdiag (frozen copy /tmp/s71b). Every job is a plain PyTorch loop wrapped
in memdiag.record; random data, random weights, CPU.

usage: python jobs.py JOB --steps N --batch B --out r/JOB-bB-sN.json
"""
import argparse
import collections
import copy
import math
import torch
import torch.nn as nn
import torch.nn.functional as F
import memdiag

D, H, C = 1024, 2048, 10


def mlp(d=D, h=H, c=C):
    return nn.Sequential(nn.Linear(d, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, c))


def batch(b, d=D, c=C):
    return torch.randn(b, d), torch.randint(0, c, (b,))


# ---------------------------------------------------------------- 1. DQN, preallocated replay
class Replay:
    def __init__(self, n, d):
        self.obs = torch.zeros(n, d)
        self.next_obs = torch.zeros(n, d)
        self.act = torch.zeros(n, dtype=torch.long)
        self.rew = torch.zeros(n)
        self.done = torch.zeros(n)
        self.n, self.ptr, self.full = n, 0, 0

    def add(self, k):
        i = torch.arange(self.ptr, self.ptr + k) % self.n
        self.obs[i] = torch.randn(k, self.obs.shape[1])
        self.next_obs[i] = torch.randn(k, self.obs.shape[1])
        self.act[i] = torch.randint(0, 18, (k,))
        self.rew[i] = torch.randn(k)
        self.done[i] = (torch.rand(k) < 0.01).float()
        self.ptr = (self.ptr + k) % self.n
        self.full = min(self.n, self.full + k)

    def sample(self, b):
        j = torch.randint(0, self.full, (b,))
        return self.obs[j], self.act[j], self.rew[j], self.next_obs[j], self.done[j]


REPLAY_N = 40000


def dqn(args, lazy):
    q = mlp(c=18)
    tgt = copy.deepcopy(q).requires_grad_(False)
    opt = torch.optim.Adam(q.parameters(), lr=1e-4)
    buf = None if lazy else Replay(REPLAY_N, D)
    if buf is not None:
        buf.add(2048)
    with memdiag.record(q, opt, output=args.out, name=args.job):
        for step in range(args.steps):
            if buf is None:
                buf = Replay(REPLAY_N, D)
                buf.add(2048)
            buf.add(256)  # act in the environment
            o, a, r, o2, d = buf.sample(args.batch)
            qsa = q(o).gather(1, a[:, None]).squeeze(1)
            with torch.no_grad():
                y = r + 0.99 * (1 - d) * tgt(o2).max(1).values
            loss = F.smooth_l1_loss(qsa, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if step % 4 == 3:
                tgt.load_state_dict(q.state_dict())


# ---------------------------------------------------------------- 2. replay as deque / list
def replay_list(args, maxlen):
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    store = collections.deque(maxlen=maxlen) if maxlen else []
    with memdiag.record(model, opt, output=args.out, name=args.job):
        for step in range(args.steps):
            # a fresh chunk of experience (8 MiB at 2048 x 1024), appended every step
            xs, ys = batch(2048)
            store.append((xs, ys))
            xs_, ys_ = store[torch.randint(0, len(store), ()).item()]
            j = torch.randint(0, 2048, (args.batch,))
            loss = F.cross_entropy(model(xs_[j]), ys_[j])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 3. whole dataset as one tensor
DS_N = 60000


def dataset(args, inside):
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    X = Y = None
    if not inside:
        X, Y = torch.randn(DS_N, D), torch.randint(0, C, (DS_N,))
    with memdiag.record(model, opt, output=args.out, name=args.job):
        for step in range(args.steps):
            if X is None:
                X, Y = torch.randn(DS_N, D), torch.randint(0, C, (DS_N,))
            j = torch.randint(0, DS_N, (args.batch,))
            loss = F.cross_entropy(model(X[j]), Y[j])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 4. EMA with AveragedModel
def ema(args, at_step):
    from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    avg = None
    if at_step is None:
        avg = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))
    with memdiag.record(model, opt, output=args.out, name=args.job):
        for step in range(args.steps):
            x, y = batch(args.batch)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            if avg is None and step == at_step:
                avg = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.999))
            if avg is not None:
                avg.update_parameters(model)
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 5. distillation from a frozen teacher
def make_teacher():
    t = mlp(h=4096)
    t.eval().requires_grad_(False)
    return t


def distill(args, inside):
    student = mlp()
    opt = torch.optim.Adam(student.parameters(), lr=1e-4)
    teacher = None if inside else make_teacher()
    with memdiag.record(student, opt, output=args.out, name=args.job):
        for step in range(args.steps):
            if teacher is None:
                teacher = make_teacher()
            x, y = batch(args.batch)
            with torch.no_grad():
                tl = teacher(x)
            sl = student(x)
            loss = 0.5 * F.cross_entropy(sl, y) + 0.5 * 4.0 * F.kl_div(
                F.log_softmax(sl / 2, 1), F.softmax(tl / 2, 1), reduction="batchmean")
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 6. large buffers vs plain attribute
class BankNet(nn.Module):
    """MoCo-like: a memory bank of 65536 x 512 keys and a 8192 x 512 positional table."""

    def __init__(self, as_buffer):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(D, H), nn.ReLU(), nn.Linear(H, 512))
        self.head = nn.Linear(512 + 512, C)
        bank = F.normalize(torch.randn(65536, 512), dim=1)
        pos = torch.randn(8192, 512)
        if as_buffer:
            self.register_buffer("bank", bank)
            self.register_buffer("pos", pos)
        else:
            self.bank = bank
            self.pos = pos
        self.ptr = 0

    def forward(self, x, t):
        q = F.normalize(self.enc(x) + self.pos[t], dim=1)
        # attention over 4096 of the bank's keys
        k = self.bank[:4096].clone()  # as MoCo does (queue.clone().detach()): the enqueue bumps the bank's version
        a = torch.softmax(q @ k.T / 0.07, 1) @ k
        with torch.no_grad():  # enqueue
            n = q.shape[0]
            # keys 4096.. are the queue (the first 4096 are read by this step's graph)
            self.bank[4096 + self.ptr:4096 + self.ptr + n] = q.detach()
            self.ptr = (self.ptr + n) % (65536 - 4096 - n)
        return self.head(torch.cat([q, a], 1))


def bank(args, as_buffer):
    model = BankNet(as_buffer)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    with memdiag.record(model, opt, output=args.out, name=args.job):
        for step in range(args.steps):
            x, y = batch(args.batch)
            t = torch.randint(0, 8192, (args.batch,))
            loss = F.cross_entropy(model(x, t), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 7. previous batch kept for a delta input
def prev_batch(args):
    model = mlp(d=2 * D)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    prev_x = torch.zeros(args.batch, D)
    with memdiag.record(model, opt, output=args.out, name=args.job):
        for step in range(args.steps):
            x, y = batch(args.batch)
            inp = torch.cat([x, x - prev_x], 1)
            loss = F.cross_entropy(model(inp), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            prev_x = x  # held one extra step


# ---------------------------------------------------------------- 8. cache of embeddings made once
def emb_cache(args):
    enc = nn.Sequential(nn.Embedding(50000, 128), nn.Linear(128, 512)).requires_grad_(False)
    model = mlp(d=512)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    cache = None
    with memdiag.record(model, opt, output=args.out, name=args.job):
        for step in range(args.steps):
            if cache is None:
                with torch.no_grad():
                    cache = torch.cat([enc(torch.arange(i, i + 5000)) for i in range(0, 50000, 5000)])
            ids = torch.randint(0, 50000, (args.batch,))
            y = torch.randint(0, C, (args.batch,))
            loss = F.cross_entropy(model(cache[ids]), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 9. gradient accumulation, clean
def accum(args):
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    micro = args.batch // 4
    with memdiag.record(model, opt, output=args.out, name=args.job):
        for step in range(args.steps):
            for _ in range(4):
                x, y = batch(micro)
                loss = F.cross_entropy(model(x), y) / 4
                loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 10. Hugging Face, clean
def hf(args, kind):
    import transformers as T
    torch.manual_seed(0)
    if kind == "gpt2":
        cfg = T.GPT2Config(n_layer=2, n_embd=256, n_head=4, vocab_size=8000, n_positions=256)
        model = T.GPT2LMHeadModel(cfg)
    else:
        cfg = T.BertConfig(num_hidden_layers=2, hidden_size=256, num_attention_heads=4,
                           intermediate_size=1024, vocab_size=8000, max_position_embeddings=256)
        model = T.BertForMaskedLM(cfg)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    with memdiag.record(model, opt, output=args.out, name=args.job):
        for step in range(args.steps):
            ids = torch.randint(0, 8000, (args.batch, 128))
            out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 11. forward caches a tensor on self
class CacheNet(nn.Module):
    def __init__(self, history):
        super().__init__()
        self.net = mlp()
        self.history = history
        self.last_hidden = None
        self.hist = []

    def forward(self, x):
        h = self.net[:4](x)
        if self.history:
            self.hist.append(h.detach())
        else:
            self.last_hidden = h.detach()
        return self.net[4](h)


def cache_self(args, history):
    model = CacheNet(history)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    with memdiag.record(model, opt, output=args.out, name=args.job):
        for step in range(args.steps):
            x, y = batch(args.batch)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 12. two optimizers, one recorded
def two_opt(args, both):
    model = mlp()
    opt_a = torch.optim.Adam(model[0].parameters(), lr=1e-4)                       # 8.0 MiB of weights
    opt_b = torch.optim.Adam(list(model[2].parameters()) + list(model[4].parameters()), lr=1e-4)  # 16.1 MiB
    with memdiag.record(model, [opt_a, opt_b] if both else opt_a, output=args.out, name=args.job):
        for step in range(args.steps):
            x, y = batch(args.batch)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt_a.step()
            opt_b.step()
            opt_a.zero_grad(set_to_none=True)
            opt_b.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- baseline: same MLP, clean
def clean(args):
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    with memdiag.record(model, opt, output=args.out, name=args.job):
        for step in range(args.steps):
            x, y = batch(args.batch)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


JOBS = {
    "clean": clean,
    "dqn-prealloc": lambda a: dqn(a, False),
    "dqn-lazy": lambda a: dqn(a, True),
    "replay-deque4": lambda a: replay_list(a, 4),
    "replay-list": lambda a: replay_list(a, None),
    "dataset-before": lambda a: dataset(a, False),
    "dataset-inside": lambda a: dataset(a, True),
    "ema-before": lambda a: ema(a, None),
    "ema-step2": lambda a: ema(a, 2),
    "teacher-before": lambda a: distill(a, False),
    "teacher-inloop": lambda a: distill(a, True),
    "bank-buffer": lambda a: bank(a, True),
    "bank-attr": lambda a: bank(a, False),
    "prev-batch": prev_batch,
    "emb-cache": emb_cache,
    "accum4": accum,
    "hf-gpt2": lambda a: hf(a, "gpt2"),
    "hf-bert": lambda a: hf(a, "bert"),
    "cache-self": lambda a: cache_self(a, False),
    "cache-self-hist": lambda a: cache_self(a, True),
    "two-opt": lambda a: two_opt(a, False),
    "two-opt-both": lambda a: two_opt(a, True),
}

if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("job", choices=sorted(JOBS))
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    torch.manual_seed(0)
    JOBS[a.job](a)
