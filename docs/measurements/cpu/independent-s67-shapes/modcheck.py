"""Cross-check of the forward-by-module figures: per module, (post-forward - pre-forward) of live
tensor memory as MemTracker counts it (storages, weak refs), own part = module - its direct
children, summed by class. One training step at a fixed shape (after one warm step).
  python modcheck.py JOB b=..,l=..   (shape as jobs.py --fixed)"""
import sys, collections
import torch
import torch.nn.functional as F
sys.argv += [] 
import jobs
from torch.distributed._tools.mem_tracker import MemTracker, _ModState

job, fixed = sys.argv[1], sys.argv[2]
torch.set_num_threads(1)
model, kind, vocab = jobs.build(job)
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
sched = jobs.schedule(job, 2, jobs.parse_fixed(fixed))
g = torch.Generator().manual_seed(99)
MiB = 2**20
def fwd(d):
    b = jobs.make_batch(kind, d, vocab, g)
    if kind == "img":
        return F.cross_entropy(model(b[0]), b[1])
    return model(**b).loss
loss = fwd(sched[0]); loss.backward(); opt.step(); opt.zero_grad(set_to_none=True); del loss
mt = MemTracker(); mt.track_external(model, opt)
with mt:
    loss = fwd(sched[1])
    net = {}
    for mod, st in mt.memory_tracking.items():
        snaps = st.snapshots
        if _ModState.PRE_FW in snaps and _ModState.POST_FW in snaps:
            pre = snaps[_ModState.PRE_FW][-1]; post = snaps[_ModState.POST_FW][-1]
            tot = lambda s: sum(v.get("Total", 0) for dev, v in s.items() if str(dev) == "cpu")
            net[mod] = tot(post) - tot(pre)
    loss.backward()
mods = dict(model.named_modules())
byid = {id(m): n for n, m in mods.items()}
own = collections.Counter()
for name, m in mods.items():
    mm = None
    for k in net:
        if getattr(k, "mod_fqn", None) is not None: pass
    # MemTracker keys are _ModMemStats-keyed by module? handle both
own_total = 0
keyed = {}
for k, v in net.items():
    keyed[k] = v
# keys are nn.Module objects (weakref-key dict)
def csum(m):   # children's net; a child never called (ModuleList) counts through its own children
    return sum(keyed[c] if c in keyed else csum(c) for c in m.children())
for m, v in keyed.items():
    if m is model: 
        continue
    ch = csum(m)
    own[type(m).__name__] += v - ch
top = csum(model)
own[type(model).__name__ + " (own, excl. children)"] = keyed.get(model, 0) - top
tot = sum(v for v in own.values() if v > 0)
print(f"{job} {fixed}: model net {keyed.get(model,0)/MiB:.1f} MiB; own parts by type (positive sum {tot/MiB:.1f}):")
for t, v in own.most_common(8):
    print(f"  {t:45s} {v/MiB:8.2f} MiB {100*v/tot:5.1f}%")
