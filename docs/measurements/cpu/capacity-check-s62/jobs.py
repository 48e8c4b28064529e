"""Library jobs for the capacity check (session 62).

  python jobs.py --job JOB --batch B [--steps S] [--seq L] --mode record -o r/X.json   # memdiag.record around the loop
  python jobs.py --job JOB --batch B [--steps S] [--seq L] --mode count               # no memdiag: counting allocator

--mode count installs a counting CPU allocator (countalloc.cpp, c10::SetCPUAllocator) before anything
is built, and prints one JSON line: the peak of live CPU tensor bytes over the training loop (weights,
gradients, optimizer state, batches, activations, temporaries: every storage made through c10's CPU
allocator, freed or not), per step, and before the loop.
Models are built from configurations with random weights; nothing is downloaded.
"""
import argparse, json, os, sys, time

p = argparse.ArgumentParser()
p.add_argument("--job", required=True)
p.add_argument("--batch", type=int, required=True, help="samples per step (global, for accum)")
p.add_argument("--steps", type=int, default=3)
p.add_argument("--seq", type=int, default=0, help="fixed sequence length (gpt2var: overrides its schedule)")
p.add_argument("--mode", choices=["record", "count", "plain"], default="count")
p.add_argument("-o", "--output", default=None)
a = p.parse_args()

HERE = os.path.dirname(os.path.abspath(__file__))
ca = None
if a.mode == "count":
    from torch.utils.cpp_extension import load
    ca = load("countalloc_s62", [os.path.join(HERE, "countalloc.cpp")], verbose=False)
    ca.install()
import torch
import torch.nn as nn
torch.manual_seed(0)
MB = 1024 * 1024
ACCUM = 4
LENS = [64, 128, 96, 160, 48, 128, 192, 80]  # gpt2var's schedule (tokens per sample, step i)


def build(job):
    import torchvision
    if job == "resnet50":
        m = torchvision.models.resnet50(num_classes=100); return m, torch.optim.AdamW(m.parameters(), lr=1e-3)
    if job == "vit":
        m = torchvision.models.vit_b_16(image_size=64, num_classes=100); return m, torch.optim.SGD(m.parameters(), lr=1e-2)
    if job == "mobilenet":
        m = torchvision.models.mobilenet_v3_small(num_classes=100); return m, torch.optim.AdamW(m.parameters(), lr=1e-3)
    if job == "frozen":
        m = torchvision.models.resnet18(num_classes=1000)
        for q in m.parameters(): q.requires_grad_(False)
        m.fc = nn.Linear(512, 100)
        return m, torch.optim.AdamW(m.fc.parameters(), lr=1e-3)
    if job == "adamw_mlp":
        m = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                          nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 1024))
        return m, torch.optim.AdamW(m.parameters(), lr=1e-3)
    import transformers as T
    if job == "bert":
        m = T.BertForMaskedLM(T.BertConfig(vocab_size=30522, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                           intermediate_size=1024, max_position_embeddings=512))
    elif job in ("llama", "accum"):
        m = T.LlamaForCausalLM(T.LlamaConfig(vocab_size=8000, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                                             num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512))
    elif job == "gpt2var":
        m = T.GPT2LMHeadModel(T.GPT2Config(vocab_size=8000, n_positions=512, n_embd=256, n_layer=4, n_head=4))
    else:
        raise SystemExit("unknown job " + job)
    m.train()
    return m, torch.optim.AdamW(m.parameters(), lr=1e-4)


model, opt = build(a.job)
model.train()
g = torch.Generator().manual_seed(1)


def one_step(step):
    j = a.job
    if j in ("resnet50", "vit", "mobilenet", "frozen"):
        px = {"resnet50": 64, "vit": 64, "mobilenet": 96, "frozen": 96}[j]
        x = torch.randn(a.batch, 3, px, px, generator=g); y = torch.randint(0, 100, (a.batch,), generator=g)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
    elif j == "adamw_mlp":
        x = torch.randn(a.batch, 1024, generator=g); y = torch.randint(0, 1024, (a.batch,), generator=g)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
    elif j == "bert":
        L = a.seq or 128
        ids = torch.randint(0, 30522, (a.batch, L), generator=g)
        labels = ids.clone(); labels[torch.rand(a.batch, L, generator=g) > 0.15] = -100
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels)
        loss = out.loss; loss.backward()
    elif j in ("llama", "gpt2var"):
        L = a.seq or (128 if j == "llama" else LENS[step % len(LENS)])
        ids = torch.randint(0, 8000, (a.batch, L), generator=g)
        out = model(input_ids=ids, labels=ids); loss = out.loss; loss.backward()
    elif j == "accum":
        L = a.seq or 128
        mb = a.batch // ACCUM
        assert mb * ACCUM == a.batch, "accum: batch must be a multiple of 4"
        for _ in range(ACCUM):
            ids = torch.randint(0, 8000, (mb, L), generator=g)
            out = model(input_ids=ids, labels=ids); loss = out.loss / ACCUM; loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(loss)


t0 = time.time()
res = {"job": a.job, "batch": a.batch, "steps": a.steps, "seq": a.seq, "mode": a.mode}
if a.mode == "record":
    import memdiag
    with memdiag.record(model, opt, output=a.output, name=a.job):
        for s in range(a.steps):
            one_step(s)
else:
    if ca: res["before_loop_mib"] = ca.current() / MB; res["build_peak_mib"] = ca.peak() / MB; ca.reset_peak()
    steps = []
    for s in range(a.steps):
        if ca: ca.reset_peak()
        one_step(s)
        if ca: steps.append(ca.peak() / MB)
    if ca:
        res["step_peaks_mib"] = [round(v, 3) for v in steps]
        res["peak_mib"] = max(steps)
        res["after_loop_mib"] = ca.current() / MB
res["seconds"] = round(time.time() - t0, 2)
print(json.dumps(res))
