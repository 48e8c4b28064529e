"""Independent jobs for memdiag (session 62), CPU.

python jobs.py --job NAME [--batch B] [--steps N] [--mode M] -o REPORT
Every model is built from a configuration with random weights; nothing is downloaded.
--norec prints parameter counts and exits without recording.
"""
import argparse
import collections
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as tuc

p = argparse.ArgumentParser()
p.add_argument("--job", required=True)
p.add_argument("--batch", type=int, default=None)
p.add_argument("--steps", type=int, default=6)
p.add_argument("--mode", default="", help="job-specific variant of the code (not memdiag's variant)")
p.add_argument("--variant", default=None, help="memdiag variant label")
p.add_argument("--given-batch", type=int, default=None, help="batch_size= passed to memdiag.record")
p.add_argument("--norec", action="store_true")
p.add_argument("-o", "--output", default=None)
a = p.parse_args()
torch.manual_seed(0)

if not a.norec:
    import memdiag


def mib(n):
    return n * 4 / 2**20


def count(*ms):
    return sum(p.numel() for m in ms for p in m.parameters())


def trainable(*ms):
    return sum(p.numel() for m in ms for p in m.parameters() if p.requires_grad)


def show(name, *ms):
    n = count(*ms)
    t = trainable(*ms)
    print(f"{name}: params {n} ({mib(n):.2f} MiB fp32), trainable {t} ({mib(t):.2f} MiB)")


def rec(model, opt, **kw):
    kw.setdefault("name", a.job)
    kw.setdefault("steps", a.steps)
    if a.variant:
        kw["variant"] = a.variant
    if a.given_batch:
        kw["batch_size"] = a.given_batch
    return memdiag.record(model, opt, output=a.output, **kw)


def mlp(sizes):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


# 1 ---------------------------------------------------- forward hook kept "for visualisation"
class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
            nn.Conv2d(64, 128, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(128), nn.ReLU(inplace=True),
            nn.Conv2d(128, 256, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(256), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(256, 10)

    def forward(self, x):
        return self.head(self.features(x))


def vishook():
    model = SmallCNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    if a.norec:
        return show("cnn", model)
    B = a.batch or 32
    feature_maps = []  # "for the TensorBoard images at the end of the epoch"

    def keep_output(module, inp, out):
        if a.mode == "detach":
            feature_maps.append(out.detach())
        elif a.mode != "none":
            feature_maps.append(out)

    model.features[3].register_forward_hook(keep_output)
    with rec(model, opt):
        for step in range(a.steps):
            x = torch.randn(B, 3, 64, 64)
            y = torch.randint(0, 10, (B,))
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    print("kept", len(feature_maps), "feature maps")


# 2 ---------------------------------------------------- LoRA adapters vs full fine-tuning (BERT from config)
class LoRALinear(nn.Module):
    def __init__(self, base, r=8, alpha=16):
        super().__init__()
        self.base = base
        self.lora_A = nn.Linear(base.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base.out_features, bias=False)
        nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B.weight)
        self.scale = alpha / r

    def forward(self, x):
        return self.base(x) + self.lora_B(self.lora_A(x)) * self.scale


class BertClassifier(nn.Module):
    def __init__(self, bert, n_classes=2):
        super().__init__()
        self.bert = bert
        self.classifier = nn.Linear(bert.config.hidden_size, n_classes)

    def forward(self, input_ids, attention_mask):
        h = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.classifier(h[:, 0])


def lora():
    import transformers
    cfg = transformers.BertConfig(vocab_size=8000, hidden_size=384, num_hidden_layers=6,
                                  num_attention_heads=6, intermediate_size=1536, max_position_embeddings=512)
    bert = transformers.BertModel(cfg)
    model = BertClassifier(bert)
    if a.mode == "lora":
        for p_ in model.bert.parameters():
            p_.requires_grad_(False)
        for layer in model.bert.encoder.layer:
            att = layer.attention.self
            att.query = LoRALinear(att.query)
            att.value = LoRALinear(att.value)
        params = [p_ for p_ in model.parameters() if p_.requires_grad]
    else:
        params = list(model.parameters())
    opt = torch.optim.AdamW(params, lr=1e-4)
    if a.norec:
        return show(f"bert-{a.mode}", model)
    B, L = a.batch or 8, 128
    with rec(model, opt):
        for step in range(a.steps):
            ids = torch.randint(0, 8000, (B, L))
            mask = torch.ones(B, L, dtype=torch.long)
            y = torch.randint(0, 2, (B,))
            loss = F.cross_entropy(model(ids, mask), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# 3 ---------------------------------------------------- checkpointing of part of the model
class Encoder(nn.Module):
    def __init__(self, ckpt, vocab=8000, d=256, layers=8):
        super().__init__()
        self.ckpt = ckpt
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.zeros(1, 128, d))
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(d, 4, 4 * d, dropout=0.1, batch_first=True, norm_first=True)
            for _ in range(layers))
        self.norm = nn.LayerNorm(d)
        self.head = nn.Sequential(nn.Linear(d, d), nn.GELU(), nn.Linear(d, 10))

    def forward(self, ids):
        h = self.emb(ids) + self.pos[:, : ids.shape[1]]
        for i, blk in enumerate(self.blocks):
            if self.ckpt == "half" and i < len(self.blocks) // 2:
                h = tuc.checkpoint(blk, h, use_reentrant=False)
            else:
                h = blk(h)
        h = self.norm(h).mean(1)
        if self.ckpt == "head":
            return tuc.checkpoint(self.head, h, use_reentrant=False)
        return self.head(h)


def partckpt():
    model = Encoder(a.mode or "none")
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    if a.norec:
        return show("encoder", model)
    B, L = a.batch or 16, 128
    with rec(model, opt):
        for step in range(a.steps):
            ids = torch.randint(0, 8000, (B, L))
            y = torch.randint(0, 10, (B,))
            loss = F.cross_entropy(model(ids), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# 4 ---------------------------------------------------- SAM (davda54/sam, verbatim in substance), base Adam
class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, adaptive=False, **kwargs):
        defaults = dict(rho=rho, adaptive=adaptive, **kwargs)
        super().__init__(params, defaults)
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups
        self.defaults.update(self.base_optimizer.defaults)

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        grad_norm = self._grad_norm()
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)
            for p_ in group["params"]:
                if p_.grad is None:
                    continue
                self.state[p_]["old_p"] = p_.data.clone()
                e_w = (torch.pow(p_, 2) if group["adaptive"] else 1.0) * p_.grad * scale.to(p_)
                p_.add_(e_w)
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p_ in group["params"]:
                if p_.grad is None:
                    continue
                p_.data = self.state[p_]["old_p"]
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def step(self, closure=None):
        assert closure is not None
        closure = torch.enable_grad()(closure)
        self.first_step(zero_grad=True)
        closure()
        self.second_step()

    def _grad_norm(self):
        dev = self.param_groups[0]["params"][0].device
        return torch.norm(torch.stack([
            ((torch.abs(p_) if g["adaptive"] else 1.0) * p_.grad).norm(p=2).to(dev)
            for g in self.param_groups for p_ in g["params"] if p_.grad is not None]), p=2)


def sam():
    import torchvision
    model = torchvision.models.resnet18(num_classes=10)
    opt = SAM(model.parameters(), torch.optim.Adam, rho=0.05, lr=1e-3)
    if a.norec:
        return show("resnet18", model)
    B = a.batch or 64
    with rec(model, opt):
        for step in range(a.steps):
            x = torch.randn(B, 3, 32, 32)
            y = torch.randint(0, 10, (B,))
            if a.mode == "explicit":  # the README's primary form
                F.cross_entropy(model(x), y).backward()
                opt.first_step(zero_grad=True)
                F.cross_entropy(model(x), y).backward()
                opt.second_step(zero_grad=True)
            else:  # closure form
                def closure():
                    loss = F.cross_entropy(model(x), y)
                    loss.backward()
                    return loss
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                opt.step(closure)
                opt.zero_grad()


# 5 ---------------------------------------------------- knowledge distillation
def distill():
    import torchvision
    teacher = torchvision.models.resnet50(num_classes=100)
    student = torchvision.models.resnet18(num_classes=100)
    teacher.eval()
    opt = torch.optim.AdamW(student.parameters(), lr=1e-3)
    if a.norec:
        show("teacher resnet50", teacher)
        return show("student resnet18", student)
    B, T = a.batch or 64, 4.0
    with rec(student, opt):
        for step in range(a.steps):
            x = torch.randn(B, 3, 64, 64)
            y = torch.randint(0, 100, (B,))
            if a.mode == "nograd":
                with torch.no_grad():
                    t_logits = teacher(x)
            else:  # forgot no_grad (and never froze the teacher)
                t_logits = teacher(x)
            s_logits = student(x)
            kd = F.kl_div(F.log_softmax(s_logits / T, -1), F.softmax(t_logits / T, -1),
                          reduction="batchmean") * T * T
            loss = 0.5 * kd + 0.5 * F.cross_entropy(s_logits, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# 6 ---------------------------------------------------- accumulation with the losses kept in a list
def accum():
    import transformers
    cfg = transformers.GPT2Config(vocab_size=8000, n_positions=256, n_embd=256, n_layer=4, n_head=4)
    model = transformers.GPT2LMHeadModel(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    if a.norec:
        return show("gpt2", model)
    mb, K, L = a.batch or 4, 4, 256
    with rec(model, opt):
        for step in range(a.steps):
            losses = []
            for k in range(K):
                ids = torch.randint(0, 8000, (mb, L))
                loss = model(input_ids=ids, labels=ids).loss / K
                if a.mode == "list":
                    losses.append(loss)         # the bug: backward once at the end of the window
                else:
                    loss.backward()
            if a.mode == "list":
                torch.stack(losses).sum().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# 7 ---------------------------------------------------- MoCo-style queue: unbounded torch.cat vs fixed ring
class MoCo(nn.Module):
    def __init__(self, mode, dim=512, K=8192):
        super().__init__()
        self.mode = mode
        self.encoder_q = mlp([3072, 1024, 1024, dim])
        self.encoder_k = mlp([3072, 1024, 1024, dim])
        for pq, pk in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            pk.data.copy_(pq.data)
            pk.requires_grad_(False)
        if mode == "grow":
            self.register_buffer("queue", F.normalize(torch.randn(256, dim), dim=1))
        else:
            self.register_buffer("queue", F.normalize(torch.randn(K, dim), dim=1))
            self.register_buffer("ptr", torch.zeros(1, dtype=torch.long))
        self.T = 0.07

    @torch.no_grad()
    def _momentum_update(self, m=0.999):
        for pq, pk in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            pk.data.mul_(m).add_(pq.data, alpha=1 - m)

    def forward(self, x_q, x_k):
        q = F.normalize(self.encoder_q(x_q), dim=1)
        with torch.no_grad():
            self._momentum_update()
            k = F.normalize(self.encoder_k(x_k), dim=1)
        l_pos = (q * k).sum(1, keepdim=True)
        l_neg = q @ self.queue.clone().detach().t()
        logits = torch.cat([l_pos, l_neg], dim=1) / self.T
        if self.mode == "grow":
            self.queue = torch.cat([self.queue, k])       # "the queue": never trimmed
        else:
            ptr = int(self.ptr)
            self.queue[ptr:ptr + k.shape[0]] = k
            self.ptr[0] = (ptr + k.shape[0]) % self.queue.shape[0]
        return logits


def moco():
    model = MoCo(a.mode or "ring")
    opt = torch.optim.SGD([p_ for p_ in model.parameters() if p_.requires_grad], lr=0.03, momentum=0.9)
    if a.norec:
        return show("moco", model)
    B = a.batch or 256
    with rec(model, opt):
        for step in range(a.steps):
            img = torch.randn(B, 3072)
            x_q = img + 0.1 * torch.randn_like(img)
            x_k = img + 0.1 * torch.randn_like(img)
            logits = model(x_q, x_k)
            loss = F.cross_entropy(logits, torch.zeros(B, dtype=torch.long))
            opt.zero_grad()
            loss.backward()
            opt.step()


# 8 ---------------------------------------------------- zero_grad only every other step; batch_size mismatch
def zerograd():
    model = mlp([2048, 2048, 2048, 2048, 10])
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    if a.norec:
        return show("mlp2048", model)
    B = a.batch or 64
    with rec(model, opt):
        for step in range(a.steps):
            x = torch.randn(B, 2048)
            y = torch.randint(0, 10, (B,))
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            if a.mode == "everyother":
                if step % 2 == 0:
                    opt.zero_grad()
            else:
                opt.zero_grad()


# 9 ---------------------------------------------------- manual mixed precision: bf16 model, fp32 master + AdamW
def master():
    model = mlp([2048, 2048, 2048, 2048, 10]).to(torch.bfloat16)
    masters = [p_.detach().clone().float().requires_grad_(True) for p_ in model.parameters()]
    opt = torch.optim.AdamW(masters, lr=1e-4)
    if a.norec:
        return show("mlp2048-bf16", model)
    B = a.batch or 64
    with rec(model, opt):
        for step in range(a.steps):
            x = torch.randn(B, 2048, dtype=torch.bfloat16)
            y = torch.randint(0, 10, (B,))
            loss = F.cross_entropy(model(x).float(), y)
            loss.backward()
            for mp, p_ in zip(masters, model.parameters()):
                mp.grad = p_.grad.float()
            opt.step()
            with torch.no_grad():
                for mp, p_ in zip(masters, model.parameters()):
                    p_.copy_(mp)
            model.zero_grad(set_to_none=True)
            opt.zero_grad(set_to_none=True)


# 10 --------------------------------------------------- Llama from config: padding to the batch max vs packing
def llama():
    import transformers
    cfg = transformers.LlamaConfig(vocab_size=8000, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                                   num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=1024,
                                   pad_token_id=0)
    model = transformers.LlamaForCausalLM(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    if a.norec:
        return show("llama", model)
    B, Lmax = a.batch or 8, 256
    g = torch.Generator().manual_seed(1)
    with rec(model, opt):
        for step in range(a.steps):
            lens = torch.randint(16, Lmax + 1, (B,), generator=g)
            if a.mode == "pack":  # the same documents concatenated into rows of Lmax, no padding
                rows = 4
                ids = torch.randint(1, 8000, (rows, Lmax))
                out = model(input_ids=ids, labels=ids)
            else:  # pad to the batch's longest
                L = int(lens.max())
                ids = torch.zeros(B, L, dtype=torch.long)
                mask = torch.zeros(B, L, dtype=torch.long)
                for i, n in enumerate(lens.tolist()):
                    ids[i, :n] = torch.randint(1, 8000, (n,))
                    mask[i, :n] = 1
                labels = ids.masked_fill(mask == 0, -100)
                out = model(input_ids=ids, attention_mask=mask, labels=labels)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# 11 --------------------------------------------------- Lookahead (timm's implementation, vendored) around AdamW
class Lookahead(torch.optim.Optimizer):
    def __init__(self, base_optimizer, alpha=0.5, k=6):
        defaults = dict(lookahead_alpha=alpha, lookahead_k=k, lookahead_step=0)
        self._base_optimizer = base_optimizer
        self.param_groups = base_optimizer.param_groups
        self.defaults = base_optimizer.defaults
        self.defaults.update(defaults)
        self.state = collections.defaultdict(dict)
        for name, default in defaults.items():
            for group in self._base_optimizer.param_groups:
                group.setdefault(name, default)

    @torch.no_grad()
    def update_slow(self, group):
        for fast_p in group["params"]:
            if fast_p.grad is None:
                continue
            param_state = self._base_optimizer.state[fast_p]
            if "lookahead_slow_buff" not in param_state:
                param_state["lookahead_slow_buff"] = torch.empty_like(fast_p)
                param_state["lookahead_slow_buff"].copy_(fast_p)
            slow = param_state["lookahead_slow_buff"]
            slow.add_(fast_p - slow, alpha=group["lookahead_alpha"])
            fast_p.copy_(slow)

    def zero_grad(self, set_to_none=True):
        # delegated: Optimizer.zero_grad would patch step() with hooks this class never initialised
        self._base_optimizer.zero_grad(set_to_none)

    def sync_lookahead(self):
        for group in self._base_optimizer.param_groups:
            self.update_slow(group)

    @torch.no_grad()
    def step(self, closure=None):
        loss = self._base_optimizer.step(closure)
        for group in self._base_optimizer.param_groups:
            group["lookahead_step"] += 1
            if group["lookahead_step"] % group["lookahead_k"] == 0:
                self.update_slow(group)
        return loss

    def state_dict(self):
        return self._base_optimizer.state_dict()

    def load_state_dict(self, state_dict):
        self._base_optimizer.load_state_dict(state_dict)
        self.param_groups = self._base_optimizer.param_groups


def lookahead():
    model = mlp([2048, 2048, 2048, 2048, 10])
    opt = Lookahead(torch.optim.AdamW(model.parameters(), lr=1e-4), k=6)
    if a.norec:
        return show("mlp2048", model)
    B = a.batch or 64
    # --mode base: the workaround of handing memdiag the wrapped optimizer
    with rec(model, opt._base_optimizer if a.mode == "base" else opt):
        for step in range(a.steps):
            x = torch.randn(B, 2048)
            y = torch.randint(0, 10, (B,))
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


globals()[a.job]()
