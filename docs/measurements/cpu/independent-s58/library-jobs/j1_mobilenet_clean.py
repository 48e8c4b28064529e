# Clean: torchvision mobilenet_v3_small, 96px, batch 32, SGD momentum.
import torch, torchvision, memdiag, time
from common import args
a = args("/tmp/indep58/reports/j1.json")
model = torchvision.models.mobilenet_v3_small(num_classes=10)
model.train()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
def loader():
    for _ in range(a.steps):
        yield torch.randn(32, 3, 96, 96), torch.randint(0, 10, (32,))
t = time.time()
with memdiag.record(model, opt, output=a.output, name="j1-mobilenet-clean"):
    for x, y in loader():
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
print("done", time.time() - t)
