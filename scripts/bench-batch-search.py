#!/usr/bin/env python3
"""--find-max-batch against a Lightning-style binary search on the same job.

    scripts/bench-batch-search.py CASE PRESET STEPS LIMIT_MIB [--device cuda] [--bin build/bin]
                                  [--repeat N]

Runs `memory_diagnostics --find-max-batch` (its tries, then the answer and
the answer + 1 in fresh processes) and times the whole command; then, in
this process, the case's model and optimizer written in PyTorch's Python
API searched the way Lightning's BatchSizeFinder does in `binsearch` mode
(pytorch_lightning/tuner/batch_size_scaling.py, _run_binary_scaling: from
batch 2 doubling until an out-of-memory error, then halving the gap, each
trial `STEPS` training steps, gc.collect() and torch.cuda.empty_cache()
between trials), under the same memory limit
(torch.cuda.set_per_process_memory_fraction). Lightning stops after 25
trials by default; here it runs to a gap of one sample so both answer the
same question. Prints one line per search and the ratio of their times.

Each side runs --repeat times (default 3), interleaved, and its median
is taken (every time printed). memdiag's time is the whole command, and
its search alone as its report times it (its tries, then the fresh runs of
the answer and the batch above, side by side, at the slower: the fresh
processes start while it searches). Each
Python search runs in a process of its own and is timed two ways: the
search alone (its model and optimizer already built in a started process,
as Lightning's tuner has them; the ratio is taken against this), and the
whole command (Python's start, torch's import, CUDA's start and the
model's build, then the search), which is how memdiag's is timed.
"""
import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

ACTIVATIONS = {"relu": torch.nn.ReLU, "gelu": torch.nn.GELU, "tanh": torch.nn.Tanh}


def case_of(bin_dir, case, preset, device):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "one.json")
        subprocess.run([os.path.join(bin_dir, "memory_diagnostics"), "-q", "--case", case, "--preset", preset,
                        "--batch-size-per-device", "1", "--steps", "1", "--device", device, "-o", out], check=True)
        return json.load(open(out))["case"]


def memdiag_search(bin_dir, case, preset, steps, limit, device):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "max.json")
        t0 = time.perf_counter()
        rc = subprocess.run([os.path.join(bin_dir, "memory_diagnostics"), "-q", "--case", case, "--preset", preset,
                             "--steps", str(steps), "--device", device, "--find-max-batch",
                             "--memory-limit-mib", str(limit), "-o", out]).returncode
        seconds = time.perf_counter() - t0
        if rc not in (0, 3):
            sys.exit(f"bench-batch-search: memory_diagnostics --find-max-batch exited {rc}")
        c = json.load(open(out))["capacity"]
        # The search alone, as the report times it: its tries one after
        # another, then each pair of fresh runs (the answer and the batch
        # above, run side by side) at the slower of the two.
        checks = [t.get("seconds", 0.0) for t in c.get("checks", [])]
        alone = sum(t.get("seconds", 0.0) for t in c["tries"]) + sum(
            max(checks[i:i + 2]) for i in range(0, len(checks), 2))
        return c["max_batch"], len(c["tries"]), bool(c.get("confirmed")), seconds, alone


class Job:
    def __init__(self, spec, device):
        m = spec["model"]
        if spec.get("batch_schedule") or "n_heads" in m or m.get("dtype", "float32") != "float32":
            sys.exit("bench-batch-search: only the MLP cases without a batch schedule are written in Python here")
        layers, width = [], m["input_dim"]
        for _ in range(m["depth"]):
            layers += [torch.nn.Linear(width, m["hidden_dim"]), ACTIVATIONS[m["activation"]]()]
            width = m["hidden_dim"]
        layers.append(torch.nn.Linear(width, m["output_dim"]))
        self.model = torch.nn.Sequential(*layers).to(device)
        o = spec["optimizer"]
        kinds = {"sgd": lambda p: torch.optim.SGD(p, lr=o["lr"], momentum=o.get("momentum", 0.0),
                                                   weight_decay=o.get("weight_decay", 0.0)),
                 "adam": lambda p: torch.optim.Adam(p, lr=o["lr"], weight_decay=o.get("weight_decay", 0.0)),
                 "adamw": lambda p: torch.optim.AdamW(p, lr=o["lr"], weight_decay=o.get("weight_decay", 0.01))}
        self.opt = kinds[o["type"]](self.model.parameters())
        g = spec.get("graph", {})
        self.retain, self.keep = g.get("retain_graph", False), g.get("keep_graph_connected_loss", False)
        self.input_dim, self.classes, self.device = m["input_dim"], m["output_dim"], device

    def trial(self, batch, steps):
        kept = []
        for _ in range(steps):
            x = torch.randn(batch, self.input_dim, device=self.device)
            y = torch.randint(0, self.classes, (batch,), device=self.device)
            loss = F.cross_entropy(self.model(x), y)
            loss.backward(retain_graph=self.retain)
            self.opt.step()
            self.opt.zero_grad(set_to_none=True)
            if self.keep:
                kept.append(loss)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def binsearch(job, steps, limit_trials=10**6):
    """Lightning's _run_binary_scaling, the trial being `steps` training steps."""
    new_size, low, high, count = 2, 1, None, 0
    while True:
        gc.collect()
        torch.cuda.empty_cache()
        try:
            job.trial(new_size, steps)
            count += 1
            if count > limit_trials:
                break
            low = new_size
            if high:
                if high - low <= 1:
                    break
                new_size = (high + low) // 2
            else:
                new_size *= 2
        except torch.OutOfMemoryError:
            count += 1
            job.opt.zero_grad(set_to_none=True)
            gc.collect()
            torch.cuda.empty_cache()
            high = new_size
            new_size = (high + low) // 2
            if high - low <= 1:
                break
    return low, count


def python_search(spec, steps, limit_mib, device_name):
    """The Lightning-style search in this process: (answer, trials, seconds of the search alone)."""
    device = torch.device(device_name)
    if device.index is None:  # the memory fraction wants an index
        device = torch.device(device.type, torch.cuda.current_device())
    total = torch.cuda.get_device_properties(device).total_memory / 2**20
    torch.cuda.set_per_process_memory_fraction(limit_mib / total, device)
    job = Job(spec, device)
    t0 = time.perf_counter()
    found, trials = binsearch(job, steps)
    return found, trials, time.perf_counter() - t0


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--python-only":  # a Python search's own process
        spec_file, steps, limit, device = sys.argv[2:6]
        print(json.dumps(python_search(json.load(open(spec_file)), int(steps), float(limit), device)))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case")
    ap.add_argument("preset")
    ap.add_argument("steps", type=int)
    ap.add_argument("limit_mib", type=float)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--bin", default=os.path.join(os.environ.get("MEMDIAG_BUILD_DIR", "build"), "bin"))
    ap.add_argument("--repeat", type=int, default=3, help="runs of each side, their medians compared")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench-batch-search: needs CUDA (the limit is a memory fraction of the device)")
    spec_file = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(case_of(a.bin, a.case, a.preset, a.device), spec_file)
    spec_file.close()
    md, alone, whole = [], [], []
    for _ in range(max(1, a.repeat)):
        md.append(memdiag_search(a.bin, a.case, a.preset, a.steps, a.limit_mib, a.device))
        t0 = time.perf_counter()
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--python-only", spec_file.name,
                              str(a.steps), str(a.limit_mib), a.device], check=True, capture_output=True, text=True)
        whole.append(time.perf_counter() - t0)
        alone.append(json.loads(out.stdout))
    os.unlink(spec_file.name)
    median = lambda xs: sorted(xs)[len(xs) // 2]
    each = lambda xs: f" (the median of {len(xs)}: {', '.join(f'{t:.2f}' for t in sorted(xs))})" if len(xs) > 1 else ""
    found, tries, confirmed = md[0][:3]
    md_s, py_s, whole_s = median([r[3] for r in md]), median([r[2] for r in alone]), median(whole)
    py_found, trials = alone[0][0], alone[0][1]
    print(f"{a.case} {a.preset}, {a.steps} steps, {a.limit_mib:g} MiB")
    print(f"  memory_diagnostics --find-max-batch: {found} ({'confirmed' if confirmed else 'not confirmed'} in fresh"
          f" processes), {tries} tries, {md_s:.2f} s for the whole command{each([r[3] for r in md])}")
    print(f"  Lightning-style binsearch in Python: {py_found}, {trials} trials, {py_s:.2f} s for the search alone"
          f"{each([r[2] for r in alone])}")
    print(f"  time ratio memdiag / Python: {md_s / py_s:.2f}x")
    md_alone = median([r[4] for r in md])
    print(f"  memdiag's search alone (its tries, then each pair of fresh runs side by side, as its report times"
          f" them; its process's start, LibTorch's load and CUDA's start left out, as the Python search's are):"
          f" {md_alone:.2f} s{each([r[4] for r in md])}; ratio {md_alone / py_s:.2f}x")
    print(f"  the Python search as a whole command (start, import, model, search): {whole_s:.2f} s{each(whole)};"
          f" ratio {md_s / whole_s:.2f}x")


if __name__ == "__main__":
    main()
