"""Independent test s70: twelve training jobs recorded with memdiag.record.

python jobs.py --job NAME [--mode M] [--batch B] [--steps N] [--variant V] -o REPORT
python jobs.py --job NAME --count      # parameter counts only, nothing recorded
--norec runs the loop without memdiag (for timing / sanity).
"""
import argparse, contextlib, copy, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F

p = argparse.ArgumentParser()
p.add_argument("--job", required=True)
p.add_argument("--mode", default="")
p.add_argument("--batch", type=int, default=0)
p.add_argument("--steps", type=int, default=6)
p.add_argument("--variant", default=None)
p.add_argument("--name", default=None)
p.add_argument("-o", "--out", default=None)
p.add_argument("--count", action="store_true")
p.add_argument("--norec", action="store_true")
args = p.parse_args()
torch.manual_seed(0)
g = torch.Generator().manual_seed(1)


def mib(n_params):
    return n_params * 4 / 2**20


def count(**models):
    for k, m in models.items():
        n = sum(p.numel() for p in m.parameters())
        nt = sum(p.numel() for p in m.parameters() if p.requires_grad)
        print(f"{k}: {n} params = {mib(n):.2f} MiB (trainable {mib(nt):.2f} MiB)")


def recorder(model, opt, B):
    if args.norec or args.count:
        return contextlib.nullcontext()
    import memdiag
    kw = dict(output=args.out, name=args.name or args.job, steps=args.steps)
    if args.variant:
        kw["variant"] = args.variant
    return memdiag.record(model, opt, **kw)


# ---------------------------------------------------------------- 1 distillation
def job_distill():
    from transformers import BertConfig, BertForMaskedLM
    B = args.batch or 16; L = 128; V = 4000
    teacher = BertForMaskedLM(BertConfig(vocab_size=V, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                         intermediate_size=1024, max_position_embeddings=L))
    student = BertForMaskedLM(BertConfig(vocab_size=V, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                                         intermediate_size=512, max_position_embeddings=L))
    teacher.eval()
    mode = args.mode or "nograd"          # nograd | grad (frozen, no no_grad) | unfrozen (requires_grad True, no no_grad)
    # detached: requires_grad True, no no_grad, teacher logits .detach()ed (its graph lives until t_logits is replaced)
    teacher.requires_grad_(mode in ("unfrozen", "detached"))
    student.train()
    opt = torch.optim.AdamW(student.parameters(), lr=1e-4)
    if args.count:
        return count(teacher=teacher, student=student)
    Tmp = 2.0
    with recorder(student, opt, B):
        for step in range(args.steps):
            ids = torch.randint(0, V, (B, L), generator=g)
            ctx = torch.no_grad() if mode == "nograd" else contextlib.nullcontext()
            with ctx:
                t_logits = teacher(input_ids=ids).logits
            t_in = t_logits.detach() if mode == "detached" else t_logits
            s_logits = student(input_ids=ids).logits
            loss = F.kl_div(F.log_softmax(s_logits / Tmp, -1), F.softmax(t_in / Tmp, -1),
                            reduction="batchmean") * Tmp * Tmp
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 2 adversarial training
def job_adv():
    import torchvision
    B = args.batch or 32; px = 96
    model = torchvision.models.resnet18(num_classes=10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if args.count:
        return count(model=model)
    mode = args.mode or "fgsm"            # fgsm: loss.backward() for x.grad; pgd: 3 x autograd.grad
    eps = 8 / 255
    model.train()
    with recorder(model, opt, B):
        for step in range(args.steps):
            x = torch.rand(B, 3, px, px, generator=g)
            y = torch.randint(0, 10, (B,), generator=g)
            if mode == "fgsm":
                opt.zero_grad(set_to_none=True)
                x.requires_grad_(True)
                loss = F.cross_entropy(model(x), y)
                loss.backward()
                x_adv = (x + eps * x.grad.sign()).clamp(0, 1).detach()
                opt.zero_grad(set_to_none=True)
                loss2 = F.cross_entropy(model(x_adv), y)
                loss2.backward()
                opt.step()
            else:
                xa = x.clone()
                for k in range(3):
                    xa.requires_grad_(True)
                    l = F.cross_entropy(model(xa), y)
                    gx, = torch.autograd.grad(l, xa)
                    xa = (xa + 2 / 255 * gx.sign()).clamp(x - eps, x + eps).clamp(0, 1).detach()
                loss2 = F.cross_entropy(model(xa), y)
                loss2.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 3 CLIP-like dual encoder
def job_clip():
    from transformers import CLIPConfig, CLIPModel
    B = args.batch or 32; L = 32; V = 8000
    cfg = CLIPConfig(text_config=dict(vocab_size=V, hidden_size=192, intermediate_size=768, num_hidden_layers=4,
                                      num_attention_heads=3, max_position_embeddings=L, eos_token_id=2),
                     vision_config=dict(image_size=64, patch_size=8, hidden_size=192, intermediate_size=768,
                                        num_hidden_layers=4, num_attention_heads=3),
                     projection_dim=128)
    model = CLIPModel(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if args.count:
        return count(model=model)
    model.train()
    with recorder(model, opt, B):
        for step in range(args.steps):
            ids = torch.randint(0, V, (B, L), generator=g)
            px = torch.randn(B, 3, 64, 64, generator=g)
            out = model(input_ids=ids, pixel_values=px, return_loss=True)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 4 wav2vec2 on raw audio
def job_w2v():
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC
    B = args.batch or 8; S = 64000
    cfg = Wav2Vec2Config(vocab_size=32, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=512, conv_dim=(128,) * 7, conv_kernel=(10, 3, 3, 3, 3, 2, 2),
                         conv_stride=(5, 2, 2, 2, 2, 2, 2), num_conv_pos_embeddings=64,
                         num_conv_pos_embedding_groups=8, layerdrop=0.0, mask_time_prob=0.05,
                         ctc_loss_reduction="mean", pad_token_id=0)
    model = Wav2Vec2ForCTC(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if args.count:
        return count(model=model)
    model.train()
    with recorder(model, opt, B):
        for step in range(args.steps):
            audio = torch.randn(B, S, generator=g)
            labels = torch.randint(1, 32, (B, 20), generator=g)
            out = model(input_values=audio, labels=labels)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 5 MoCo queue
def job_moco():
    B = args.batch or 1024; D = 1024; K = 4096; T = 0.07
    enc = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, D))
    enc_k = copy.deepcopy(enc).requires_grad_(False)
    opt = torch.optim.SGD(enc.parameters(), lr=0.03, momentum=0.9)
    if args.count:
        return count(enc=enc, enc_k=enc_k)
    mode = args.mode or "queue"           # queue: detached keys, bounded at K; leak: non-detached keys cat'd forever
    queue = torch.empty(0, D)
    with recorder(enc, opt, B):
        for step in range(args.steps):
            x = torch.randn(B, 1024, generator=g)
            x1 = x + 0.1 * torch.randn(B, 1024, generator=g)
            x2 = x + 0.1 * torch.randn(B, 1024, generator=g)
            q = F.normalize(enc(x1), dim=1)
            if mode == "queue":
                with torch.no_grad():
                    for pq, pk in zip(enc.parameters(), enc_k.parameters()):
                        pk.mul_(0.99).add_(pq.detach(), alpha=0.01)
                    k = F.normalize(enc_k(x2), dim=1)
            else:
                k = F.normalize(enc(x2), dim=1)       # bug: keys from the trained encoder, graph kept
            l_pos = (q * k.detach()).sum(1, keepdim=True)
            l_neg = q @ queue.detach().T if queue.numel() else q.new_zeros(B, 0)
            logits = torch.cat([l_pos, l_neg], 1) / T
            loss = F.cross_entropy(logits, torch.zeros(B, dtype=torch.long))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if mode == "queue":
                queue = torch.cat([k.detach(), queue], 0)[:K]
            else:
                queue = torch.cat([queue, k], 0)      # bug: not detached, never truncated


# ---------------------------------------------------------------- 6 PPO-like
class NatureCNN(nn.Module):
    def __init__(self, n_act=6):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(4, 32, 8, 4), nn.ReLU(), nn.Conv2d(32, 64, 4, 2), nn.ReLU(),
                                  nn.Conv2d(64, 64, 3, 1), nn.ReLU(), nn.Flatten(), nn.Linear(3136, 512), nn.ReLU())
        self.pi = nn.Linear(512, n_act)
        self.v = nn.Linear(512, 1)

    def forward(self, obs):
        h = self.body(obs)
        return self.pi(h), self.v(h).squeeze(-1)


def job_ppo():
    MB = args.batch or 256; NENV = 8; TS = 128; N = NENV * TS; EPOCHS = 2
    model = NatureCNN()
    opt = torch.optim.Adam(model.parameters(), lr=2.5e-4)
    if args.count:
        return count(model=model)
    per_rollout = EPOCHS * (N // MB)
    rollouts = max(1, args.steps // per_rollout)
    with recorder(model, opt, MB):
        for r in range(rollouts):
            obs_buf = torch.empty(N, 4, 84, 84)
            act_buf = torch.empty(N, dtype=torch.long)
            logp_buf = torch.empty(N)
            val_buf = torch.empty(N)
            with torch.no_grad():
                for t in range(TS):
                    o = torch.rand(NENV, 4, 84, 84, generator=g)
                    logits, v = model(o)
                    dist = torch.distributions.Categorical(logits=logits)
                    a = dist.sample()
                    sl = slice(t * NENV, (t + 1) * NENV)
                    obs_buf[sl] = o; act_buf[sl] = a; logp_buf[sl] = dist.log_prob(a); val_buf[sl] = v
            adv = torch.randn(N, generator=g)
            ret = val_buf + adv
            for ep in range(EPOCHS):
                perm = torch.randperm(N, generator=g)
                for i in range(0, N, MB):
                    idx = perm[i:i + MB]
                    logits, v = model(obs_buf[idx])
                    dist = torch.distributions.Categorical(logits=logits)
                    ratio = (dist.log_prob(act_buf[idx]) - logp_buf[idx]).exp()
                    a_ = adv[idx]
                    pg = -torch.min(ratio * a_, ratio.clamp(0.8, 1.2) * a_).mean()
                    loss = pg + 0.5 * F.mse_loss(v, ret[idx]) - 0.01 * dist.entropy().mean()
                    loss.backward()
                    nn.utils.clip_grad_norm_(model.parameters(), 0.5)
                    opt.step()
                    opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 7 resize_token_embeddings mid-run
def gpt2(V, E, NL, NH, NP):
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel(GPT2Config(vocab_size=V, n_embd=E, n_layer=NL, n_head=NH, n_positions=NP, use_cache=False))


def job_resize():
    B = args.batch or 8; L = 128; V0 = 8000; V1 = 16000
    model = gpt2(V0, 256, 4, 4, L)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if args.count:
        count(model=model); model.resize_token_embeddings(V1); return count(resized=model)
    model.train()
    V = V0
    out = None
    with recorder(model, opt, B):
        for step in range(args.steps):
            if step == 3:
                out = None   # a previous step's output held across resize breaks its backward (HF/torch, not memdiag)
                old = model.get_input_embeddings().weight
                model.resize_token_embeddings(V1, mean_resizing=False)
                new = model.get_input_embeddings().weight
                for grp in opt.param_groups:
                    grp["params"] = [new if p is old else p for p in grp["params"]]
                opt.state.pop(old, None)
                del old
                V = V1
            ids = torch.randint(0, V, (B, L), generator=g)
            out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 8 optimizer re-created / 12 foreach
def wide_mlp():
    return nn.Sequential(nn.Linear(2048, 4096), nn.ReLU(), nn.Linear(4096, 2048), nn.ReLU(), nn.Linear(2048, 10))


def job_reopt():
    B = args.batch or 64
    model = wide_mlp()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if args.count:
        return count(model=model)
    mode = args.mode or "recreate"        # once | recreate | clear
    with recorder(model, opt, B):
        for step in range(args.steps):
            if step > 0 and step % 2 == 0:
                if mode == "recreate":
                    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
                elif mode == "clear":
                    opt.state.clear()
            x = torch.randn(B, 2048, generator=g)
            y = torch.randint(0, 10, (B,), generator=g)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


def job_foreach():
    B = args.batch or 64
    if args.variant == "deep" or (args.name or "").startswith("deep"):
        # 16 equal 1024 x 1024 layers (4 MiB each, 64 MiB): a foreach update's temporaries are all of them at once
        model = nn.Sequential(*[m for _ in range(16) for m in (nn.Linear(1024, 1024), nn.ReLU())], nn.Linear(1024, 10))
        w = 1024
    else:
        model = wide_mlp(); w = 2048
    fe = {"foreach": True, "default": None, "fused": None}[args.mode or "foreach"]
    kw = {"fused": True} if args.mode == "fused" else {"foreach": fe}
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, **kw)
    if args.count:
        return count(model=model)
    with recorder(model, opt, B):
        for step in range(args.steps):
            x = torch.randn(B, w, generator=g)
            y = torch.randint(0, 10, (B,), generator=g)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 9 multi-task
class MultiTask(nn.Module):
    def __init__(self):
        super().__init__()
        from transformers import BertConfig, BertModel
        self.enc = BertModel(BertConfig(vocab_size=8000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                        intermediate_size=1024, max_position_embeddings=128))
        self.cls = nn.Linear(256, 5)
        self.tag = nn.Linear(256, 17)

    def forward(self, input_ids, attention_mask):
        o = self.enc(input_ids=input_ids, attention_mask=attention_mask)
        return self.cls(o.pooler_output), self.tag(o.last_hidden_state)


def job_multitask():
    B = args.batch or 16; L = 128
    model = MultiTask()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if args.count:
        return count(model=model)
    model.train()
    with recorder(model, opt, B):
        for step in range(args.steps):
            ids = torch.randint(0, 8000, (B, L), generator=g)
            mask = torch.ones(B, L, dtype=torch.long)
            yc = torch.randint(0, 5, (B,), generator=g)
            yt = torch.randint(0, 17, (B, L), generator=g)
            c, t = model(input_ids=ids, attention_mask=mask)
            loss = F.cross_entropy(c, yc) + F.cross_entropy(t.reshape(-1, 17), yt.reshape(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 10 gradient checkpointing
def job_gc():
    B = args.batch or 4; L = 256
    model = gpt2(4000, 256, 6, 4, L)
    if (args.mode or "plain") == "ckpt":
        model.gradient_checkpointing_enable()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if args.count:
        return count(model=model)
    model.train()
    with recorder(model, opt, B):
        for step in range(args.steps):
            ids = torch.randint(0, 4000, (B, L), generator=g)
            out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- 11 periodic no_grad validation at 16x batch
def job_evalspike():
    import torchvision
    B = args.batch or 16; EB = 256; px = 96
    model = torchvision.models.resnet18(num_classes=10)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if args.count:
        return count(model=model)
    xe = torch.rand(EB, 3, px, px, generator=g)
    with recorder(model, opt, B):
        for step in range(args.steps):
            model.train()
            x = torch.rand(B, 3, px, px, generator=g)
            y = torch.randint(0, 10, (B,), generator=g)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if step % 2 == 1:
                model.eval()
                with torch.no_grad():
                    acc = model(xe).argmax(1).float().mean().item()


JOBS = dict(distill=job_distill, adv=job_adv, clip=job_clip, w2v=job_w2v, moco=job_moco, ppo=job_ppo,
            resize=job_resize, reopt=job_reopt, foreach=job_foreach, multitask=job_multitask, gc=job_gc,
            evalspike=job_evalspike)
t0 = time.time()
JOBS[args.job]()
print(f"{args.job} {args.mode} done in {time.time() - t0:.1f}s", file=sys.stderr)
