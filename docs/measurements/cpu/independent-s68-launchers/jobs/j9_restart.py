"""J9: torchrun --max-restarts 1; rank 1 raises after step 3's forward on the first attempt."""
import os, sys
import torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
sys.path.insert(0, os.path.dirname(__file__))
import common, memdiag

attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
dist.init_process_group("gloo")
r = dist.get_rank()
common.log("attempt", attempt, "pid", os.getpid())
model = DDP(common.gpt2())
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
output = sys.argv[1].replace("{restart}", str(attempt))
kw = {"steps": int(sys.argv[3])} if len(sys.argv) > 3 else {}
import contextlib
ctx = contextlib.nullcontext() if os.environ.get("J9_NORECORD") else memdiag.record(model, opt, output=output, name=sys.argv[2], **kw)
with ctx:
    for step in range(6):
        x = common.ids(4, seed=100 * r + step)
        out = model(input_ids=x, labels=x)
        if attempt == 0 and r == 1 and step == 3:
            raise RuntimeError(f"injected crash at step {step} on rank {r}, attempt {attempt}")
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
common.log("done attempt", attempt)
dist.destroy_process_group()
