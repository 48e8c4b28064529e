import sys, json, torch, torchvision, memdiag, torch.nn.functional as F
B = int(sys.argv[1]); out = sys.argv[2]
torch.manual_seed(0)
m = torchvision.models.resnet50(num_classes=100); opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
with memdiag.record(m, opt, output=out):
    for _ in range(3):
        x = torch.randn(B, 3, 64, 64)
        F.cross_entropy(m(x), torch.randint(0, 100, (B,))).backward(); opt.step(); opt.zero_grad()
