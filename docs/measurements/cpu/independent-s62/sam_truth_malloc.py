import sys, gc, ctypes, torch, torch.nn.functional as F, torchvision
class MI(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena","ordblks","smblks","hblks","hblkhd","usmblks","fsmblks","uordblks","fordblks","keepcost")]
libc = ctypes.CDLL("libc.so.6"); libc.mallinfo2.restype = MI
def used():
    gc.collect(); m = libc.mallinfo2(); return (m.uordblks + m.hblkhd) / 2**20
sys.argv = ["jobs.py", "--job", "x", "--norec"]
src = open(__import__("os").path.join(__import__("os").path.dirname(__import__("os").path.abspath(__file__)), "jobs.py")).read().replace("globals()[a.job]()", "")
g = {"__name__": "jobsmod"}; exec(compile(src, "jobs.py", "exec"), g)
torch.manual_seed(0)
model = torchvision.models.resnet18(num_classes=10)
opt = g["SAM"](model.parameters(), torch.optim.Adam, rho=0.05, lr=1e-3)
base = used()
for step in range(3):
    x = torch.randn(64, 3, 32, 32); y = torch.randint(0, 10, (64,))
    def closure():
        l = F.cross_entropy(model(x), y); l.backward(); return l
    loss = F.cross_entropy(model(x), y); loss.backward(); opt.step(closure); opt.zero_grad()
    del loss, x, y
    print("after step", step, "malloc in use above the model's start:", round(used() - base, 2), "MiB")
