"""Independent jobs, ind66.
  python jobs.py --job JOB --batch B [--steps S] --mode record -o r/X.json
  python jobs.py --job JOB --batch B [--steps S] --mode count     # counting allocator, no memdiag
"""
import argparse, json, time
p = argparse.ArgumentParser()
p.add_argument("--job", required=True)
p.add_argument("--batch", type=int, required=True)
p.add_argument("--steps", type=int, default=3)
p.add_argument("--mode", choices=["record", "count"], default="count")
p.add_argument("-o", "--output", default=None)
a = p.parse_args()
ca = None
if a.mode == "count":
    from torch.utils.cpp_extension import load
    ca = load("countalloc_ind66", ["/work/main/docs/measurements/cpu/capacity-check-s62/countalloc.cpp"], verbose=False)
    ca.install()
import torch
import torch.nn.functional as F
torch.manual_seed(0)
MB = 1024 * 1024
g = torch.Generator().manual_seed(1)
V = 8000

def build(job):
    import torchvision.models as tvm
    if job == "effb0":
        m = tvm.efficientnet_b0(num_classes=100); return m, torch.optim.AdamW(m.parameters(), lr=1e-3), 64
    if job == "densenet":
        m = tvm.densenet121(num_classes=100); return m, torch.optim.SGD(m.parameters(), lr=1e-2, momentum=0.9), 64
    if job == "mnv3":
        m = tvm.mobilenet_v3_large(num_classes=100); return m, torch.optim.AdamW(m.parameters(), lr=1e-3), 96
    if job == "resnext":
        m = tvm.resnext50_32x4d(num_classes=100); return m, torch.optim.AdamW(m.parameters(), lr=1e-3), 64
    import transformers as T
    if job == "gpt2":
        m = T.GPT2LMHeadModel(T.GPT2Config(vocab_size=V, n_positions=256, n_embd=256, n_layer=4, n_head=4))
        return m, torch.optim.AdamW(m.parameters(), lr=1e-4), None
    if job == "bert":
        m = T.BertForSequenceClassification(T.BertConfig(hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                                         intermediate_size=1024, num_labels=2))
        return m, torch.optim.AdamW(m.parameters(), lr=1e-4), None
    raise SystemExit("unknown job " + job)

model, opt, px = build(a.job)
model.train()

def one_step():
    B = a.batch
    if px:
        x = torch.randn(B, 3, px, px, generator=g); y = torch.randint(0, 100, (B,), generator=g)
        loss = F.cross_entropy(model(x), y)
    elif a.job == "gpt2":
        ids = torch.randint(0, V, (B, 128), generator=g)
        loss = model(input_ids=ids, labels=ids).loss
    else:
        ids = torch.randint(0, 30522, (B, 128), generator=g)
        loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=torch.randint(0, 2, (B,), generator=g)).loss
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return float(loss)

t0 = time.time()
res = {"job": a.job, "batch": a.batch, "steps": a.steps, "mode": a.mode}
if a.mode == "record":
    import memdiag
    with memdiag.record(model, opt, output=a.output, name=a.job):
        for s in range(a.steps):
            one_step()
else:
    res["before_loop_mib"] = round(ca.current() / MB, 3)
    steps = []
    for s in range(a.steps):
        ca.reset_peak(); one_step(); steps.append(ca.peak() / MB)
    res["step_peaks_mib"] = [round(v, 3) for v in steps]
    res["peak_mib"] = round(max(steps), 3)
res["seconds"] = round(time.time() - t0, 2)
print(json.dumps(res))
