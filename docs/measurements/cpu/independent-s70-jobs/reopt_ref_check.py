"""Is the optimizer given to memdiag.record kept alive after the loop re-creates it? (weakref check)"""
import gc, weakref, torch, torch.nn as nn, torch.nn.functional as F, memdiag, sys
model = nn.Sequential(nn.Linear(2048, 4096), nn.ReLU(), nn.Linear(4096, 2048), nn.ReLU(), nn.Linear(2048, 10))
def run(record):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    first = weakref.ref(opt)
    ctx = memdiag.record(model, opt, output="/tmp/s70-reopt-ref.json") if record else __import__("contextlib").nullcontext()
    with ctx:
        for step in range(4):
            if step == 2:
                opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
                gc.collect()
                print(f"record={record}: first optimizer alive after re-creation: {first() is not None}",
                      f"(its state: {sum(t.numel()*4 for s in first().state.values() for t in s.values() if torch.is_tensor(t))/2**20:.1f} MiB)" if first() else "")
            loss = F.cross_entropy(model(torch.randn(64, 2048)), torch.randint(0, 10, (64,)))
            loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
run(False); run(True)
