"""J5: DDP GPT-2 with uneven batches: rank 0 gets 16 samples a step, rank 1 gets 4."""
import os, sys
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
sys.path.insert(0, os.path.dirname(__file__))
import common, memdiag

dist.init_process_group("gloo")
r = dist.get_rank()
B = int(os.environ.get("J5_B0", 16)) if r == 0 else 4
model = DDP(common.gpt2())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
out_name = os.environ.get("J5_OUT", "r/j5.json")
with memdiag.record(model, opt, output=out_name, name=os.environ.get("J5_NAME", "j5-uneven")):
    for step in range(6):
        x = common.ids(B, seed=100 * r + step)
        out = model(input_ids=x, labels=x)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
common.log("done batch", B)
dist.destroy_process_group()
