"""J1: mp.spawn + init_method tcp://, no RANK/WORLD_SIZE in the environment, DDP, MLP-60, Adam."""
import os, sys
import torch, torch.distributed as dist, torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
sys.path.insert(0, os.path.dirname(__file__))
import common, memdiag


def worker(rank, world):
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        assert k not in os.environ, k
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29511", rank=rank, world_size=world)
    model = DDP(common.mlp([1024, 3072, 3072, 1024]))
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(rank)
    with memdiag.record(model, opt, output=os.environ.get("J1_OUT", "r/j1.json"), name="j1-spawn-tcp"):
        for step in range(6):
            x = torch.randn(int(os.environ.get("J1_B", 32)), 1024, generator=g)
            loss = model(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    common.log("done")
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2)
