"""J8: FSDP2 fully_shard (each Linear, then the root) over gloo on the CPU, MLP-60, Adam."""
import os, sys
import torch, torch.distributed as dist
from torch.distributed.fsdp import fully_shard
from torch.distributed.device_mesh import init_device_mesh
sys.path.insert(0, os.path.dirname(__file__))
import common, memdiag

dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (dist.get_world_size(),))
model = common.mlp([1024, 3072, 3072, 1024])
for m in model:
    if isinstance(m, torch.nn.Linear):
        fully_shard(m, mesh=mesh)
fully_shard(model, mesh=mesh)
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
g = torch.Generator().manual_seed(dist.get_rank())
with memdiag.record(model, opt, output=os.environ.get("J8_OUT", "r/j8.json"), name="j8-fsdp2"):
    for step in range(6):
        x = torch.randn(int(os.environ.get("J8_B", 32)), 1024, generator=g)
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
common.log("done")
dist.destroy_process_group()
