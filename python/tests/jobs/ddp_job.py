"""A data-parallel job of a user's own, as torchrun runs it: DDP, FSDP2's
fully_shard or ZeroRedundancyOptimizer over Gloo on the CPU, recorded with
memdiag.record on every rank. Rank 0 may carry extra samples (--extra N),
the imbalance a capacity constraint comes from.

    torchrun --nproc-per-node=2 python/tests/jobs/ddp_job.py OUT.json [--extra 64] [--mode ddp|fsdp2|fsdp2-root|zero1]

fsdp2 shards each layer and the model; fsdp2-root the model alone, whose
weights are then gathered for its forward and held to backward.
"""
import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

if os.environ.get("MEMDIAG_TEST_INSTALLED") != "1":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import memdiag  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("output")
p.add_argument("--extra", type=int, default=0)
p.add_argument("--batch", type=int, default=16)
p.add_argument("--steps", type=int, default=3)
p.add_argument("--width", type=int, default=256)
p.add_argument("--mode", choices=["ddp", "fsdp2", "fsdp2-root", "zero1"], default="ddp")
p.add_argument("--census", action="store_true", help="the tensor census by role (per-rank shards)")
p.add_argument("--rank0-first", metavar="OUT", help="rank 0 alone records a block of its own first (a check before training)")
p.add_argument("--fail-rank", type=int, default=-1, help="this rank raises in the forward of step 1: the launcher then stops the others with SIGTERM")
a = p.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(a.width, 4 * a.width), torch.nn.GELU(), torch.nn.Linear(4 * a.width, 10))
if a.mode.startswith("fsdp2"):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (dist.get_world_size(),))
    if a.mode == "fsdp2":
        for layer in (model[0], model[2]):
            fully_shard(layer, mesh=mesh)
    ddp = fully_shard(model, mesh=mesh)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
elif a.mode == "zero1":
    from torch.distributed.optim import ZeroRedundancyOptimizer
    ddp = DDP(model)
    opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-3)
else:
    ddp = DDP(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
batch = a.batch + (a.extra if rank == 0 else 0)
if a.rank0_first and rank == 0:
    with memdiag.record(None, None, output=a.rank0_first):
        torch.randn(4, a.width) @ torch.randn(a.width, 4)
g = torch.Generator().manual_seed(rank)
with memdiag.record(ddp, opt, output=a.output, census=a.census):
    for step in range(a.steps):
        if step == 1 and rank == a.fail_rank:
            raise RuntimeError(f"rank {rank} failed on purpose")
        x = torch.randn(batch, a.width, generator=g)
        y = torch.randint(0, 10, (batch,), generator=g)
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
dist.destroy_process_group()
