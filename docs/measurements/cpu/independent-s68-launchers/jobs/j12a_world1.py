"""J12a: torchrun --nproc-per-node 1: a gloo process group of world size 1, DDP GPT-2."""
import os, sys
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
sys.path.insert(0, os.path.dirname(__file__))
import common, memdiag

dist.init_process_group("gloo")
model = DDP(common.gpt2())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
with memdiag.record(model, opt, output="r/j12a.json", name="j12a-world1"):
    for step in range(4):
        x = common.ids(8, seed=step)
        out = model(input_ids=x, labels=x)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
common.log("done")
dist.destroy_process_group()
