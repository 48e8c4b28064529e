"""Only counts parameters (no training, no memdiag): inputs to EXPECTED.md."""
import torch, models
torch.manual_seed(0)
for k, b in models.BUILDERS.items():
    m = b()
    n = sum(p.numel() for p in m.parameters())
    big = max(m.parameters(), key=lambda p: p.numel())
    extra = ""
    if k == "resnet18":
        fc = sum(p.numel() for p in m.fc.parameters()); extra = f" fc={fc}"
    print(f"{k}: params={n} ({n*4/2**20:.2f} MiB) largest={tuple(big.shape)}{extra}")
