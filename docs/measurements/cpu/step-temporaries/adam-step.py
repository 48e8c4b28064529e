"""step()'s own peak above its end, by Adam's implementation: foreach (the default),
foreach=False and fused=True, on a 500k x 64 embedding and a head (CPU).

    OMP_NUM_THREADS=1 PYTHONPATH=python python3 docs/measurements/cpu/step-temporaries/adam-step.py foreach|loop|fused
"""
import sys, json, torch, memdiag, torch.nn.functional as F
mode = sys.argv[1]
torch.manual_seed(0)
emb = torch.nn.Embedding(500_000, 64)
head = torch.nn.Linear(64, 10)
class M(torch.nn.Module):
    def __init__(s): super().__init__(); s.e, s.h = emb, head
    def forward(s, x): return s.h(s.e(x).mean(1))
m = M()
kw = {"foreach": {"foreach": True}, "loop": {"foreach": False}, "fused": {"fused": True}}[mode]
opt = torch.optim.Adam(m.parameters(), lr=1e-3, **kw)
out = f"/tmp/foreach-{mode}.json"
with memdiag.record(m, opt, output=out, kept=False):
    for _ in range(4):
        x = torch.randint(0, 500_000, (256, 16))
        F.cross_entropy(m(x), torch.randint(0, 10, (256,))).backward()
        opt.step(); opt.zero_grad(set_to_none=True)
r = json.load(open(out))
steps = [s for s in r["samples"] if s["phase"] == "step" and s["step"] >= 1]
print(mode, "step peak above its end:", max(s["peak_allocated_mib"] - s["allocated_mib"] for s in steps))
