#!/usr/bin/env python3
"""The largest batch predicted from one recorded run, checked in fresh processes.

For each job: record it with memdiag.record at a small batch, ask
compare_memory_reports for the largest batch within a budget (P), then run
P and the next batch past 1.02 P, each in a fresh process under
memdiag.limit_memory(budget): P should complete and the larger run out.
On the CPU the budget is checked against the report's peak instead (there
is no limit to run under). Prints one line per job and writes the reports
under --out.

  python3 scripts/profile-capacity-check.py [--device cuda] [--jobs mlp,resnet18,gpt2,convnext] [--out DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, os.path.join(ROOT, "python"))

# job: (recorded batch, budget MiB on CUDA, budget MiB on the CPU)
JOBS = {"mlp": (64, 1024, 320), "resnet18": (16, 2048, 640), "gpt2": (4, 4096, 1024), "convnext": (8, 3072, 700)}


def run_one(job, batch, device, out, limit):
    import torch
    import torch.nn.functional as F

    import memdiag
    torch.manual_seed(0)
    if job == "mlp":
        m = torch.nn.Sequential(torch.nn.Linear(1024, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048),
                                torch.nn.ReLU(), torch.nn.Linear(2048, 1024))
        make = lambda: (torch.randn(batch, 1024, device=device), torch.randint(0, 1024, (batch,), device=device))  # noqa: E731
        loss_of = lambda m, x, y: F.cross_entropy(m(x), y)  # noqa: E731
    elif job == "resnet18":
        import torchvision
        m = torchvision.models.resnet18(num_classes=100)
        make = lambda: (torch.randn(batch, 3, 64, 64, device=device), torch.randint(0, 100, (batch,), device=device))  # noqa: E731
        loss_of = lambda m, x, y: F.cross_entropy(m(x), y)  # noqa: E731
    elif job == "convnext":
        # Depthwise convolutions: on the CPU their backward frees a
        # workspace of its own, sized by the channels, at any batch.
        import torchvision
        m = torchvision.models.convnext_tiny(num_classes=100)
        make = lambda: (torch.randn(batch, 3, 64, 64, device=device), torch.randint(0, 100, (batch,), device=device))  # noqa: E731
        loss_of = lambda m, x, y: F.cross_entropy(m(x), y)  # noqa: E731
    elif job == "gpt2":
        import transformers as T
        m = T.GPT2LMHeadModel(T.GPT2Config(vocab_size=8000, n_positions=256, n_embd=256, n_layer=6, n_head=4))
        make = lambda: (torch.randint(0, 8000, (batch, 256), device=device), None)  # noqa: E731
        loss_of = lambda m, x, y: m(input_ids=x, labels=x).loss  # noqa: E731
    else:
        raise SystemExit(f"unknown job {job!r} (allowed: {', '.join(JOBS)})")
    m.to(device)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-4)
    if limit:
        memdiag.limit_memory(limit)
    try:
        with memdiag.record(m, opt, output=out):
            for _ in range(3):
                x, y = make()
                loss_of(m, x, y).backward()
                opt.step()
                opt.zero_grad()
    except torch.OutOfMemoryError:
        pass
    with open(out) as f:
        r = json.load(f)
    peak = max(s["peak_allocated_mib"] for s in r["samples"] if s.get("step") is not None)
    print(json.dumps({"status": r["status"], "peak_mib": peak}))


def fresh(job, batch, device, out, limit=None):
    cmd = [sys.executable, os.path.abspath(__file__), "--run", job, str(batch), "--device", device, "--out", out]
    if limit:
        cmd += ["--limit", str(limit)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    if p.returncode != 0 or not lines:
        raise SystemExit(f"{job} at {batch}: rc {p.returncode}\n{p.stderr[-2000:]}")
    return json.loads(lines[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default=None)
    ap.add_argument("--jobs", default=",".join(JOBS))
    ap.add_argument("--out", default=None)
    ap.add_argument("--bin", default=os.environ.get("MEMDIAG_BIN", os.path.join(ROOT, "build", "bin")))
    ap.add_argument("--run", nargs=2, metavar=("JOB", "BATCH"), help=argparse.SUPPRESS)
    ap.add_argument("--limit", type=float, default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.device is None:
        import torch
        a.device = "cuda" if torch.cuda.is_available() else "cpu"
    if a.run:
        return run_one(a.run[0], int(a.run[1]), a.device, a.out, a.limit)
    out = a.out or tempfile.mkdtemp()
    os.makedirs(out, exist_ok=True)
    compare = os.path.join(a.bin, "compare_memory_reports")
    print(f"device {a.device}; reports under {out}")
    print(f"{'job':9s} {'b':>4s} {'budget':>7s} {'P':>6s} {'binds':28s} {'peak at P':>10s} {'status':>9s} "
          f"{'1.02P':>6s} {'peak':>8s} {'status':>9s}")
    for job in a.jobs.split(","):
        b, cuda_budget, cpu_budget = JOBS[job]
        budget = cuda_budget if a.device == "cuda" else cpu_budget
        path = os.path.join(out, f"{job}-b{b}.json")
        fresh(job, b, a.device, path)
        v = json.loads(subprocess.run([compare, "--format", "json", path, "--budget-mib", str(budget)], check=True,
                                      capture_output=True, text=True).stdout)["groups"][0]
        c = v["capacity"][0]
        p = c["max_batch"]
        node = c["binding"].get("node")
        binds = c["binding"]["phase"] + " " + c["binding"]["piece"] + (f" {node['index']}/{node['of']}" if node else "")
        limit = budget if a.device == "cuda" else None
        at = fresh(job, p, a.device, os.path.join(out, f"{job}-P{p}.json"), limit)
        over = int(p * 1.02) + 1
        above = fresh(job, over, a.device, os.path.join(out, f"{job}-P{over}.json"), limit)
        print(f"{job:9s} {b:4d} {budget:7.0f} {p:6d} {binds:28s} {at['peak_mib']:10.1f} {at['status']:>9s} "
              f"{over:6d} {above['peak_mib']:8.1f} {above['status']:>9s}", flush=True)


if __name__ == "__main__":
    main()
