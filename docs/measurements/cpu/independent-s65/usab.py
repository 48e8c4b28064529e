import sys, os, traceback, torch, torch.nn as nn, torch.nn.functional as F
import memdiag
torch.manual_seed(0)
case = sys.argv[1]
def mk():
    m = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)); return m, torch.optim.Adam(m.parameters())
def loop(m, opt, steps=3, call=None):
    for _ in range(steps):
        x = torch.randn(32, 64); y = torch.randint(0, 10, (32,))
        out = (call or m)(x); loss = F.cross_entropy(out, y); loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
m, opt = mk()
try:
    if case == "rank":
        with memdiag.record(m, opt, output="u/x-{rank}.json"): loop(m, opt)
    elif case == "swapped":
        with memdiag.record(opt, m, output="u/swapped.json"): loop(m, opt)
    elif case == "noopt":
        with memdiag.record(m, output="u/noopt.json"): loop(m, opt)
    elif case == "nodir":
        with memdiag.record(m, opt, output="u/missing/dir/x.json"): loop(m, opt)
    elif case == "badbatch":
        with memdiag.record(m, opt, output="u/bb.json", batch_size=0): loop(m, opt)
    elif case == "typo":
        with memdiag.record(m, opt, output="u/typo.json", step=3): loop(m, opt)
    elif case == "wrapper":  # pass the inner module, loop calls a wrapper holding it
        class W(nn.Module):
            def __init__(s, inner): super().__init__(); s.inner = inner
            def forward(s, x): return s.inner(x)
        w = W(m)
        with memdiag.record(w, opt, output="u/wrapper-outer-recorded.json"): loop(m, opt)  # records w, loop calls m
    elif case == "notmodule":
        with memdiag.record(lambda x: x, opt, output="u/nm.json"): loop(m, opt)
except Exception as e:
    print("EXC:", type(e).__name__, str(e)[:600])
print("files:", sorted(os.listdir("u")))
