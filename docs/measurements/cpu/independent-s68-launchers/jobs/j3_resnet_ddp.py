"""J3: one process per torchrun 'node'; ResNet-18 64x64, SGD momentum, DDP."""
import os, sys
import torch, torch.distributed as dist, torchvision
from torch.nn.parallel import DistributedDataParallel as DDP
sys.path.insert(0, os.path.dirname(__file__))
import common, memdiag

dist.init_process_group("gloo")
common.log("RANK", os.environ["RANK"], "LOCAL_RANK", os.environ["LOCAL_RANK"], "GROUP_RANK", os.environ.get("GROUP_RANK"))
torch.manual_seed(0)
model = DDP(torchvision.models.resnet18(weights=None, num_classes=100))
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
lossf = torch.nn.CrossEntropyLoss()
g = torch.Generator().manual_seed(dist.get_rank())
with memdiag.record(model, opt, output=os.environ.get("J3_OUT", "r/j3.json"), name="j3-two-nodes"):
    for step in range(6):
        B = int(os.environ.get("J3_B", 64))
        x = torch.randn(B, 3, 64, 64, generator=g)
        y = torch.randint(0, 100, (B,), generator=g)
        loss = lossf(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
common.log("done")
dist.destroy_process_group()
