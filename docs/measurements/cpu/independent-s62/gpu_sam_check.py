"""GPU cross-check of the SAM job's cleanup figure: memdiag's allocated vs torch.cuda.memory_allocated()."""
import sys, os, json, torch, torch.nn.functional as F, torchvision
here = os.path.dirname(os.path.abspath(__file__))
sys.argv = ["jobs.py", "--job", "x", "--norec"]
src = open(os.path.join(here, "jobs.py")).read().replace("globals()[a.job]()", "")
g = {"__name__": "jobsmod"}; exec(compile(src, "jobs.py", "exec"), g)
import memdiag
out = os.environ.get("OUT", "/tmp")
for form in ("closure", "explicit"):
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10).cuda()
    opt = g["SAM"](model.parameters(), torch.optim.Adam, rho=0.05, lr=1e-3)
    truth = []
    with memdiag.record(model, opt, output=f"{out}/sam-{form}-cuda.json", name="sam", steps=4):
        for step in range(4):
            x = torch.randn(64, 3, 32, 32, device="cuda"); y = torch.randint(0, 10, (64,), device="cuda")
            if form == "explicit":
                F.cross_entropy(model(x), y).backward(); opt.first_step(zero_grad=True)
                F.cross_entropy(model(x), y).backward(); opt.second_step(zero_grad=True)
            else:
                def closure():
                    l = F.cross_entropy(model(x), y); l.backward(); return l
                loss = F.cross_entropy(model(x), y); loss.backward(); opt.step(closure); opt.zero_grad(); del loss
            truth.append(round(torch.cuda.memory_allocated() / 2**20, 2))
    r = json.load(open(f"{out}/sam-{form}-cuda.json"))
    print(form, "torch.cuda.memory_allocated after each step (MiB):", truth)
    print(form, "memdiag cleanups:", [(s["step"], round(s["allocated_mib"], 2), s.get("tensors")) for s in r["samples"] if s["phase"] == "cleanup"])
    del model, opt; torch.cuda.empty_cache()
