import sys, torch, torch.distributed as dist
from transformers import GPT2Config, GPT2LMHeadModel
import memdiag

mode, out = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
cfg = GPT2Config(vocab_size=32000, n_positions=64, n_embd=128, n_layer=1, n_head=4,
                 resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
model = GPT2LMHeadModel(cfg)
if mode == "zero1":
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.distributed.optim import ZeroRedundancyOptimizer
    wrapped = DDP(model)
    opt = ZeroRedundancyOptimizer(wrapped.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-3)
elif mode == "fsdp2":
    from torch.distributed.fsdp import fully_shard
    for blk in model.transformer.h:
        fully_shard(blk)
    fully_shard(model)
    wrapped = model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
else:  # plain ddp
    from torch.nn.parallel import DistributedDataParallel as DDP
    wrapped = DDP(model)
    opt = torch.optim.AdamW(wrapped.parameters(), lr=1e-3)
g = torch.Generator().manual_seed(7 + rank)
with memdiag.record(wrapped, opt, output=out, name="gpt2-bigvocab", modules=(__import__("os").environ.get("MODS","1")=="1")):
    for step in range(4):
        ids = torch.randint(0, 32000, (int(__import__("os").environ.get("BATCH","1")), 8), generator=g)
        loss = wrapped(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
dist.destroy_process_group()
