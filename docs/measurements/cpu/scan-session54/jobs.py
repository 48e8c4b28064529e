import sys, os, json, subprocess, torch, torch.nn.functional as F, memdiag
torch.manual_seed(0)
kind, out = sys.argv[1], sys.argv[2]
def loop(model, opt, make, steps, cast=False):
    with memdiag.record(model, opt, output=out, kept=False):
        for _ in range(steps):
            args, kw, loss_of = make()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cast):
                y = model(*args, **kw)
            loss_of(y).backward(); opt.step(); opt.zero_grad(set_to_none=True)
if kind.startswith("mlp"):
    _, W, B, S = kind.split(":"); W, B, S = int(W), int(B), int(S)
    m = torch.nn.Sequential(torch.nn.Linear(W, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    loop(m, torch.optim.SGD(m.parameters(), lr=1e-3), lambda: ((torch.randn(B, W),), {}, lambda y: y.pow(2).mean()), S)
elif kind.startswith("resnet"):
    RB, RS = (64, 128) if "big" in kind else (8, 64)
    import torchvision
    m = torchvision.models.resnet18(num_classes=10)
    loop(m, torch.optim.AdamW(m.parameters()), lambda: ((torch.randn(RB, 3, RS, RS),), {}, lambda y: F.cross_entropy(y.float(), torch.randint(0, 10, (RB,)))), 3, cast=kind.endswith("amp"))
elif kind.startswith("bert"):
    from transformers import BertConfig, BertForMaskedLM
    m = BertForMaskedLM(BertConfig(num_hidden_layers=4, hidden_size=256, num_attention_heads=4, intermediate_size=1024))
    if kind.endswith("bf16"): m = m.to(torch.bfloat16)
    def make():
        ids = torch.randint(0, 30522, (16, 128))
        return (), {"input_ids": ids, "labels": ids}, lambda y: y.loss
    loop(m, torch.optim.AdamW(m.parameters()), make, 3)
