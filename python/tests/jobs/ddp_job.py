"""A data-parallel job of a user's own, as torchrun runs it: DDP over Gloo on
the CPU, recorded with memdiag.record on every rank. Rank 0 may carry extra
samples (--extra N), the imbalance a capacity constraint comes from.

    torchrun --nproc-per-node=2 python/tests/jobs/ddp_job.py OUT.json [--extra 64]
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
a = p.parse_args()

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(a.width, 4 * a.width), torch.nn.GELU(), torch.nn.Linear(4 * a.width, 10))
ddp = DDP(model)
opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
batch = a.batch + (a.extra if rank == 0 else 0)
g = torch.Generator().manual_seed(rank)
with memdiag.record(ddp, opt, output=a.output, census=False):
    for _ in range(a.steps):
        x = torch.randn(batch, a.width, generator=g)
        y = torch.randint(0, 10, (batch,), generator=g)
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
dist.destroy_process_group()
