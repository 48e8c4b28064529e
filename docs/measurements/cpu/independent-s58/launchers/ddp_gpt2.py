import os, sys, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import GPT2Config, GPT2LMHeadModel
import memdiag

out = sys.argv[1]
imbalance = len(sys.argv) > 2 and sys.argv[2] == "imb"
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
cfg = GPT2Config(vocab_size=2000, n_positions=128, n_embd=64, n_layer=2, n_head=4,
                 resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
model = GPT2LMHeadModel(cfg)
ddp = DDP(model)
opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
batch = 12 if (imbalance and rank == 0) else 8
g = torch.Generator().manual_seed(100 + rank)
with memdiag.record(ddp, opt, output=out, name="ddp-gpt2"):
    for step in range(6):
        ids = torch.randint(0, 2000, (batch, 128), generator=g)
        loss = ddp(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
dist.destroy_process_group()
