"""J11: mp.spawn, env vars set by the script in each child, DDP + ZeroRedundancyOptimizer(Adam)."""
import os, sys
import torch, torch.distributed as dist, torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.distributed.optim import ZeroRedundancyOptimizer
sys.path.insert(0, os.path.dirname(__file__))
import common, memdiag


def worker(rank, world):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29561", RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    dist.init_process_group("gloo")
    model = DDP(common.mlp([2048, 8192, 256, 256]))
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=1e-4)
    mine = sum(p.numel() for p in opt.optim.param_groups[0]["params"])
    common.log("ZeRO shard parameters on this rank:", mine, f"= {mine*4/2**20:.2f} MiB, state {2*mine*4/2**20:.1f} MiB")
    g = torch.Generator().manual_seed(rank)
    with memdiag.record(model, opt, output=os.environ.get("J11_OUT", "r/j11-{rank}.json"), name="j11-spawn-zero1"):
        for step in range(6):
            x = torch.randn(int(os.environ.get("J11_B", 32)), 2048, generator=g)
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    common.log("done")
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2)
