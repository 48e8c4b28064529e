import torch, torch.nn as nn, torch.nn.functional as F, memdiag, json, ctypes, gc
class MI(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena","ordblks","smblks","hblks","hblkhd","usmblks","fsmblks","uordblks","fordblks","keepcost")]
libc = ctypes.CDLL("libc.so.6"); libc.mallinfo2.restype = MI
used = lambda: (gc.collect(), (libc.mallinfo2().uordblks + libc.mallinfo2().hblkhd) / 2**20)[1]
model = nn.Sequential(nn.Linear(2048, 2048), nn.ReLU(), nn.Linear(2048, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
base = used()
with memdiag.record(model, opt, output="/tmp/swap.json", name="swap"):
    for s in range(4):
        F.cross_entropy(model(torch.randn(32, 2048)), torch.randint(0, 10, (32,))).backward()
        with torch.no_grad():
            old = [p.data.clone() for p in model.parameters()]   # SAM-like: keep a copy
            for p in model.parameters(): p.add_(1e-3)              # perturb
            for p, o in zip(model.parameters(), old): p.data = o   # restore by swapping storage
        del old
        opt.step(); opt.zero_grad()
        print("step", s, "malloc above start", round(used() - base, 2))
r = json.load(open("/tmp/swap.json"))
print([(x["step"], round(x["allocated_mib"], 2)) for x in r["samples"] if x["phase"] == "cleanup"], "weights", round(sum(p.numel() for p in model.parameters())*4/2**20, 2))
