"""J7: DDP GPT-2, rank 1 keeps every step's logits in a list (a leak on one rank)."""
import os, sys
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
sys.path.insert(0, os.path.dirname(__file__))
import common, memdiag

dist.init_process_group("gloo")
r = dist.get_rank()
model = DDP(common.gpt2())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
kept = []
with memdiag.record(model, opt, output="r/j7.json", name="j7-leak-rank1"):
    for step in range(8):
        x = common.ids(8, seed=100 * r + step)
        out = model(input_ids=x, labels=x)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if r == 1:
            kept.append(out.logits)          # the bug, on rank 1 only
common.log("done, kept", len(kept))
dist.destroy_process_group()
