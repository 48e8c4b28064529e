"""Session 61's recorder changes on CUDA (the steady lane engaged): each job
recorded every step, its report and the comparer's verdict kept."""
import collections, json, os, subprocess, sys
import torch, torch.nn.functional as F
sys.path.insert(0, os.path.join(os.getcwd(), "python"))
import memdiag

OUT = sys.argv[1]
CMP = os.path.join(os.getcwd(), "build", "bin", "compare_memory_reports")
dev = "cuda" if torch.cuda.is_available() else "cpu"
B = 64 if dev == "cuda" else 4
os.makedirs(OUT, exist_ok=True)


def trunk():
    return torch.nn.Sequential(torch.nn.Conv2d(3, 64, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.Conv2d(64, 64, 3, padding=1), torch.nn.ReLU()).to(dev)


class TwoHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = trunk()
        self.cls = torch.nn.Linear(64, 10)
        self.seg = torch.nn.Conv2d(64, 5, 1)

    def forward(self, x):
        h = self.trunk(x)
        return self.cls(h.mean((2, 3))), self.seg(h)


def verdict(name):
    path = os.path.join(OUT, name + ".json")
    txt = subprocess.run([CMP, path], capture_output=True, text=True).stdout
    js = json.loads(subprocess.run([CMP, "--format", "json", path], capture_output=True, text=True).stdout)
    open(os.path.join(OUT, name + ".txt"), "w").write(txt)
    g = js["groups"][0]
    print(f"{name}: {g['dominant_cause']}; components " +
          ", ".join(f"{c['cause']} {c['mib']:.1f}" for c in g["components"][:3]))
    return g


def twoloss(summed):
    torch.manual_seed(0)
    model = TwoHead().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    name = "twoloss-sum" if summed else "twoloss"
    with memdiag.record(model, opt, output=os.path.join(OUT, name + ".json")):
        for _ in range(12):
            x = torch.randn(B, 3, 64, 64, device=dev)
            c, sg = model(x)
            l1 = F.cross_entropy(c, torch.randint(0, 10, (B,), device=dev))
            l2 = F.cross_entropy(sg, torch.randint(0, 5, (B, 64, 64), device=dev))
            if summed:
                (l1 + l2).backward()
            else:
                l1.backward(retain_graph=True)
                l2.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    g = verdict(name)
    return g


def cache(keep):
    torch.manual_seed(0)
    model = TwoHead().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    recent = collections.deque(maxlen=3)
    name = "cache-" + keep
    with memdiag.record(model, opt, output=os.path.join(OUT, name + ".json")):
        for _ in range(12):
            x = torch.randn(B, 3, 64, 64, device=dev)
            h = model.trunk(x)
            c, sg = model(x)
            loss = F.cross_entropy(sg, torch.randint(0, 5, (B, 64, 64), device=dev)) + 0.0 * c.sum()
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            recent.append(h if keep == "features" else loss)
    return verdict(name)


def late_eval(keep_all):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 4096),
                                torch.nn.ReLU(), torch.nn.Linear(4096, 10)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    xv, yv = torch.randn(32 * B * 4, 1024, device=dev), torch.randint(0, 10, (32 * B * 4,), device=dev)
    vals, val = [], None
    name = "late-evals" if keep_all else "late-eval"
    with memdiag.record(model, opt, output=os.path.join(OUT, name + ".json")):
        for step in range(12):
            opt.zero_grad(set_to_none=True)
            x, y = torch.randn(256, 1024, device=dev), torch.randint(0, 10, (256,), device=dev)
            F.cross_entropy(model(x), y).backward()
            opt.step()
            if step >= 2:
                model.eval()
                val = F.cross_entropy(model(xv), yv)
                if keep_all:
                    vals.append(val)
                model.train()
    return verdict(name)


def checkpointed(reentrant):
    from torch.utils.checkpoint import checkpoint

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.block = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024))
            self.head = torch.nn.Linear(1024, 10)

        def forward(self, x):
            return self.head(checkpoint(self.block, x, use_reentrant=reentrant))

    torch.manual_seed(0)
    model = Net().to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    name = f"checkpoint-reentrant-{reentrant}"
    with memdiag.record(model, opt, output=os.path.join(OUT, name + ".json")):
        for _ in range(8):
            x = torch.randn(2048, 1024, device=dev, requires_grad=reentrant)
            F.cross_entropy(model(x), torch.randint(0, 10, (2048,), device=dev)).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    g = verdict(name)
    print(f"  model.checkpointing={json.load(open(os.path.join(OUT, name + '.json')))['model'].get('checkpointing')}, "
          f"checkpointing_taken={g['checkpointing_taken']}")


def trainer():
    import transformers
    torch.manual_seed(0)
    config = transformers.DistilBertConfig(vocab_size=30522, dim=768, hidden_dim=3072, n_layers=6, n_heads=12,
                                           max_position_embeddings=512, num_labels=3)
    model = transformers.DistilBertForSequenceClassification(config)
    g = torch.Generator().manual_seed(0)
    data = [{"input_ids": torch.randint(0, 30522, (256,), generator=g), "attention_mask": torch.ones(256, dtype=torch.long),
             "labels": torch.randint(0, 3, (), generator=g)} for _ in range(32 * 8)]
    args = transformers.TrainingArguments(output_dir="/tmp/trainer", per_device_train_batch_size=32, max_steps=8,
                                          report_to=[], save_strategy="no", disable_tqdm=True, logging_steps=1000)
    if dev == "cpu":
        return print("trainer: CUDA only here")
    trainer = transformers.Trainer(model=model, args=args, train_dataset=data)
    opt = trainer.create_optimizer()
    with memdiag.record(model, opt, output=os.path.join(OUT, "trainer.json")):
        trainer.train()
    verdict("trainer")


for job in (lambda: twoloss(False), lambda: twoloss(True), lambda: cache("features"), lambda: cache("losses"),
            lambda: late_eval(False), lambda: late_eval(True), lambda: checkpointed(False), lambda: checkpointed(True),
            trainer):
    try:
        job()
    except Exception as e:  # one job's failure is said, the rest run
        print("job failed:", repr(e))
    torch.cuda.empty_cache()
