"""J6: DDP gradient accumulation with no_sync(): 4 micro-batches of 4, GPT-2, AdamW."""
import os, sys, contextlib
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
sys.path.insert(0, os.path.dirname(__file__))
import common, memdiag

dist.init_process_group("gloo")
r = dist.get_rank()
model = DDP(common.gpt2())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
K = 4
with memdiag.record(model, opt, output="r/j6-{rank}.json", name="j6-nosync"):
    for step in range(6):
        for k in range(K):
            ctx = model.no_sync() if k < K - 1 else contextlib.nullcontext()
            with ctx:
                x = common.ids(4, seed=1000 * r + 10 * step + k)
                loss = model(input_ids=x, labels=x).loss / K
                loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
common.log("done")
dist.destroy_process_group()
