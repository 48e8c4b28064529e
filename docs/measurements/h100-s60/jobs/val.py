import sys, torch, torch.nn.functional as F, torchvision, memdiag
no_grad = sys.argv[1] == "1"
torch.manual_seed(0)
model = torchvision.models.efficientnet_b0(weights=None, num_classes=100).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
xv, yv = torch.randn(64, 3, 128, 128, device="cuda"), torch.randint(0, 100, (64,), device="cuda")
val_loss, log = None, []
with memdiag.record(model, opt, output=sys.argv[2]):
    for _ in range(6):
        opt.zero_grad(set_to_none=True)
        if val_loss is not None:
            log.append(val_loss.item())
        x, y = torch.randn(32, 3, 128, 128, device="cuda"), torch.randint(0, 100, (32,), device="cuda")
        F.cross_entropy(model(x), y).backward()
        opt.step()
        model.eval()
        if no_grad:
            with torch.no_grad():
                val_loss = F.cross_entropy(model(xv), yv)
        else:
            val_loss = F.cross_entropy(model(xv), yv)
        model.train()
