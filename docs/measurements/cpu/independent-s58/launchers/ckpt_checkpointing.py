import sys, torch
from transformers import GPT2Config, GPT2LMHeadModel
import memdiag

out, ck = sys.argv[1], sys.argv[2] == "ckpt"
torch.manual_seed(0)
cfg = GPT2Config(vocab_size=500, n_positions=128, n_embd=128, n_layer=6, n_head=4,
                 resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False)
model = GPT2LMHeadModel(cfg)
model.train()
if ck:
    model.gradient_checkpointing_enable()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
g = torch.Generator().manual_seed(11)
kw = dict(variant="checkpointing") if ck else {}
with memdiag.record(model, opt, output=out, name="gpt2-ckpt", seed=0, **kw):
    for step in range(4):
        ids = torch.randint(0, 500, (8, 128), generator=g)
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        print(step, loss.item())
