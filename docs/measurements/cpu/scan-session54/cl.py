import sys, json, collections, torch, torch.nn.functional as F, memdiag
M, S, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512))
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
recent, history = collections.deque(maxlen=M), []
with memdiag.record(model, opt, output=out, census=False):
    for _ in range(S):
        x = torch.randn(1024, 512); y = model(x); F.mse_loss(y, x).backward()
        recent.append(y.detach().clone()); history.append(y.detach()); opt.step(); opt.zero_grad(set_to_none=True)
r = json.load(open(out))
print(M, S, [(k.get("held_steps"), round(k["mib_per_step"], 2), k["per_step"]) for e in r["events"] if e["kind"] == "kept" for k in e["kept"] if k["what"] == "tensor"])
