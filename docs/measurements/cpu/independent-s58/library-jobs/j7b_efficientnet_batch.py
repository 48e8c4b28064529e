# Clean: efficientnet_b0, gradient accumulation done right (4 micro-batches of 8, loss/4, one step).
import torch, torchvision, memdiag, time
from common import args
a = args("/tmp/indep58/reports/j7.json")
import os; B = int(os.environ.get("B", 8))
model = torchvision.models.efficientnet_b0(num_classes=10)
model.train()
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
K = 4
def loader():
    for _ in range(a.steps * K):
        yield torch.randn(B, 3, 64, 64), torch.randint(0, 10, (B,))
t = time.time()
with memdiag.record(model, opt, output=a.output, name="j7-efficientnet-accum"):
    for i, (x, y) in enumerate(loader()):
        loss = loss_fn(model(x), y) / K
        loss.backward()
        if (i + 1) % K == 0:
            opt.step()
            opt.zero_grad(set_to_none=True)
print("done", time.time() - t)
