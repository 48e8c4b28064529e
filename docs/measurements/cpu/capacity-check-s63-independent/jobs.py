"""Jobs for the independent capacity check (session 63).

  python jobs.py --job JOB --batch B [--steps S] [--seq L] --mode record -o r/X.json
  python jobs.py --job JOB --batch B [--steps S] [--seq L] --mode count      # counting allocator, no memdiag
--batch is the global batch per step (neoxaccum: split in 2 micro-batches). optvar: --seq 0 uses the
varying schedule LENS; --seq L holds every step at length L (for the counted truth).
"""
import argparse, json, os, time

p = argparse.ArgumentParser()
p.add_argument("--job", required=True)
p.add_argument("--batch", type=int, required=True)
p.add_argument("--steps", type=int, default=3)
p.add_argument("--seq", type=int, default=0)
p.add_argument("--mode", choices=["record", "count"], default="count")
p.add_argument("-o", "--output", default=None)
a = p.parse_args()

HERE = os.path.dirname(os.path.abspath(__file__))
ca = None
if a.mode == "count":
    from torch.utils.cpp_extension import load
    ca = load("countalloc_s63i", [os.path.join(HERE, "..", "capacity-check-s62", "countalloc.cpp")], verbose=False)
    ca.install()
import torch
import torch.nn as nn
torch.manual_seed(0)
MB = 1024 * 1024
ACCUM = 2
LENS = [64, 128, 96, 192]


def build(job):
    import torchvision
    if job == "effnet":
        m = torchvision.models.efficientnet_b0(num_classes=100)
        return m, torch.optim.AdamW(m.parameters(), lr=1e-3)
    if job == "vitfrozen":
        from torchvision.models.vision_transformer import VisionTransformer
        m = VisionTransformer(image_size=64, patch_size=8, num_layers=6, num_heads=4, hidden_dim=256,
                              mlp_dim=1024, num_classes=100)
        for q in m.conv_proj.parameters(): q.requires_grad_(False)
        m.encoder.pos_embedding.requires_grad_(False); m.class_token.requires_grad_(False)
        for blk in list(m.encoder.layers)[:3]:
            for q in blk.parameters(): q.requires_grad_(False)
        return m, torch.optim.AdamW([q for q in m.parameters() if q.requires_grad], lr=1e-3)
    if job == "mlpsgdm":
        m = nn.Sequential(nn.Linear(512, 2048), nn.ReLU(), nn.Linear(2048, 2048), nn.ReLU(),
                          nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10))
        return m, torch.optim.SGD(m.parameters(), lr=1e-2, momentum=0.9)
    import transformers as T
    if job == "t5":
        m = T.T5ForConditionalGeneration(T.T5Config(vocab_size=8000, d_model=256, d_kv=32, d_ff=1024, num_layers=4,
                                                    num_decoder_layers=4, num_heads=8, decoder_start_token_id=0, pad_token_id=0))
    elif job == "neoxaccum":
        m = T.GPTNeoXForCausalLM(T.GPTNeoXConfig(vocab_size=8000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                                 intermediate_size=1024, max_position_embeddings=512, tie_word_embeddings=False))
    elif job == "t5var":  # extra: t5 with the encoder length varying step to step (batch 4, decoder 32)
        m = T.T5ForConditionalGeneration(T.T5Config(vocab_size=8000, d_model=256, d_kv=32, d_ff=1024, num_layers=4,
                                                    num_decoder_layers=4, num_heads=8, decoder_start_token_id=0, pad_token_id=0))
    elif job in ("optvar", "optvareager"):  # optvareager (extra): eager attention, L x L scores kept
        cfg = T.OPTConfig(vocab_size=8000, hidden_size=256, num_hidden_layers=4, ffn_dim=1024,
                          num_attention_heads=4, max_position_embeddings=2048, word_embed_proj_dim=256)
        if job == "optvareager": cfg._attn_implementation = "eager"
        m = T.OPTForCausalLM(cfg)
    else:
        raise SystemExit("unknown job " + job)
    return m, torch.optim.AdamW(m.parameters(), lr=1e-4)


model, opt = build(a.job)
model.train()
g = torch.Generator().manual_seed(1)


def one_step(step):
    j = a.job
    if j in ("effnet", "vitfrozen"):
        x = torch.randn(a.batch, 3, 64, 64, generator=g); y = torch.randint(0, 100, (a.batch,), generator=g)
        loss = nn.functional.cross_entropy(model(x), y); loss.backward()
    elif j == "mlpsgdm":
        x = torch.randn(a.batch, 512, generator=g); y = torch.randint(0, 10, (a.batch,), generator=g)
        loss = nn.functional.cross_entropy(model(x), y); loss.backward()
    elif j == "t5":
        ids = torch.randint(1, 8000, (a.batch, 128), generator=g)
        labels = torch.randint(1, 8000, (a.batch, 32), generator=g)
        out = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels)
        loss = out.loss; loss.backward()
    elif j == "neoxaccum":
        mb = a.batch // ACCUM; assert mb * ACCUM == a.batch
        for _ in range(ACCUM):
            ids = torch.randint(0, 8000, (mb, 128), generator=g)
            out = model(input_ids=ids, labels=ids); loss = out.loss / ACCUM; loss.backward()
    elif j == "t5var":
        L = a.seq or LENS[step % len(LENS)]
        ids = torch.randint(1, 8000, (a.batch, L), generator=g)
        labels = torch.randint(1, 8000, (a.batch, 32), generator=g)
        loss = model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=labels).loss; loss.backward()
    elif j in ("optvar", "optvareager"):
        L = a.seq or LENS[step % len(LENS)]
        ids = torch.randint(2, 8000, (a.batch, L), generator=g)
        out = model(input_ids=ids, labels=ids); loss = out.loss; loss.backward()
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
    res["before_loop_mib"] = ca.current() / MB; ca.reset_peak()
    steps = []
    for s in range(a.steps):
        ca.reset_peak(); one_step(s); steps.append(ca.peak() / MB)
    res["step_peaks_mib"] = [round(v, 3) for v in steps]
    res["peak_mib"] = round(max(steps), 3)
res["seconds"] = round(time.time() - t0, 2)
print(json.dumps(res))
