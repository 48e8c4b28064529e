"""J10: two recordings one after the other in one torchrun launch (batch 4, then 16)."""
import os, sys, gc
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
sys.path.insert(0, os.path.dirname(__file__))
import common, memdiag

dist.init_process_group("gloo")
r = dist.get_rank()
for B in (4, 16):
    model = DDP(common.gpt2())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    with memdiag.record(model, opt, output=f"r/j10-b{B}-{{rank}}.json", name="j10-two-recordings"):
        for step in range(4):
            x = common.ids(B, seed=100 * r + step)
            out = model(input_ids=x, labels=x)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    del model, opt, out
    gc.collect()
    common.log("done batch", B)
dist.destroy_process_group()
