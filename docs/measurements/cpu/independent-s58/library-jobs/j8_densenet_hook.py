# Bug: a forward hook on features.denseblock1 stores its outputs (not detached) in a list.
import torch, torchvision, memdiag, time
from common import args
a = args("/tmp/indep58/reports/j8.json")
model = torchvision.models.densenet121(num_classes=10)
model.train()
feats = []
model.features.denseblock1.register_forward_hook(lambda m, i, o: feats.append(o))  # BUG
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loss_fn = torch.nn.CrossEntropyLoss()
def loader():
    for _ in range(a.steps):
        yield torch.randn(8, 3, 64, 64), torch.randint(0, 10, (8,))
t = time.time()
with memdiag.record(model, opt, output=a.output, name="j8-densenet-hook"):
    for x, y in loader():
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
print("done", time.time() - t, len(feats))
