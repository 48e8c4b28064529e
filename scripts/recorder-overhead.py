#!/usr/bin/env python3
"""What the Python recorder costs a training loop: wall time per step of the
same loop without it, with it (default settings), and with it and no tensor
census, on memdiag's MLP cases and on torchvision's ResNet-50.

    python3 scripts/recorder-overhead.py [--device cuda] [--steps 20] [--rounds 5] [--cases alpha,beta,gamma,resnet50]

In one process per workload: the model is built once and warmed up; then
rounds of loops of --steps steps each, plain and recorded in several ways,
each timed from the first forward to a device synchronisation after the last
step (inside the recording block: starting and ending a recording, paid once
per job, is timed apart as start+end). Printed: the medians, and each mode's
overhead as the median over rounds of its time against the plain loop of the
same round, every step recorded (the recorder never waits for the device),
without the tensor census, with a wait at each step's
end (sync="step"), without NVML's per-process query, bare (neither census
nor NVML), and sampling one step in 10 (every=10); the recorder's own host
time per step as its report gives it, with and without the census; then, for
the MLPs, a job of --long-steps steps at the recorder's defaults (every step
of the first 100, then one in 100) and bare, against a plain loop as long. Where a
loop is bound by the device that host time hides behind the device's work;
where it is bound by launches, it is what the loop pays.

The recorder's once-a-job work inside the loop falls in its first 5 steps
(the modules' readings at steps 0 and 1, the walks of the live tensors at
the cleanups of steps 0 to 4): every loop (plain and recorded) also waits
for the device after its step 4, and the last columns give the steady
steps apart (steps 5 on, each mode against the plain loop's steps 5 on, the
recorder's own host time a step there) and what the first 5 steps cost
once (ms, recorded at the defaults less plain).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "python", "examples"))
import memdiag  # noqa: E402
from memdiag import _recorder  # noqa: E402


def mlp_workload(case_name, device, preset):
    import mlp_job
    case = json.load(open(os.path.join(ROOT, "cases", case_name + ".json")))
    preset = preset or case["default_preset"]
    model, m = mlp_job.build(case, preset)
    model.to(device)
    opt = mlp_job.optimizer_for(case, model)
    batch = case["presets"][preset]["batch_size"]
    graph = case.get("graph", {})

    def loop(steps):
        kept = []
        for _ in range(steps):
            x = torch.randn(batch, m["input_dim"], device=device)
            y = torch.randint(0, m["output_dim"], (batch,), device=device)
            loss = F.cross_entropy(model(x), y)
            loss.backward(retain_graph=graph.get("retain_graph", False))
            if graph.get("keep_graph_connected_loss"):
                kept.append(loss)
            opt.step()
            del x, y, loss
            opt.zero_grad(set_to_none=True)

    return model, opt, loop, f"{case_name} {preset} batch {batch}"


def resnet_workload(device, batch=64):
    import torchvision
    model = torchvision.models.resnet50(weights=None).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def loop(steps):
        for _ in range(steps):
            x = torch.randn(batch, 3, 224, 224, device=device)
            y = torch.randint(0, 1000, (batch,), device=device)
            F.cross_entropy(model(x), y).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

    return model, opt, loop, f"resnet50 batch {batch}"


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


FIRST = 5  # steps 0-4: the recorder's once-a-job work (modules' readings at steps 0 and 1, kept walks at 1-4)


def timed(device, fn, steps, split=None):
    """ms per step of fn(steps), from a synchronised start to a synchronised
    end. With `split` (a dict) and more than FIRST steps, the device is also
    waited for after step FIRST - 1 (split["at"](), if given, is called
    there), and split gets the ms per step of the steps after it ("steady")
    and the ms of the first FIRST ("first_ms")."""
    sync(device)
    t = time.perf_counter()
    if split is None or steps <= FIRST:
        fn(steps)
        sync(device)
        return (time.perf_counter() - t) * 1000.0 / steps
    fn(FIRST)
    sync(device)
    if "at" in split:
        split["at"]()
    t1 = time.perf_counter()
    fn(steps - FIRST)
    sync(device)
    t2 = time.perf_counter()
    split["steady"] = (t2 - t1) * 1000.0 / (steps - FIRST)
    split["first_ms"] = (t1 - t) * 1000.0
    return (t2 - t) * 1000.0 / steps


def one(name, args):
    device = torch.device(args.device)
    torch.manual_seed(0)
    model, opt, loop, label = resnet_workload(device) if name == "resnet50" else \
        mlp_workload(name, device, args.preset)
    loop(3)  # kernels, workspaces, the optimizer's state
    out = tempfile.mkdtemp()
    modes = {
        "plain": lambda n: loop(n),
        "recorded": lambda n: _recorded(model, opt, loop, n, os.path.join(out, "r.json"), True),
        "no census": lambda n: _recorded(model, opt, loop, n, os.path.join(out, "r.json"), False),
        "sync per phase": lambda n: _recorded(model, opt, loop, n, os.path.join(out, "r.json"), True, "step"),
        "no NVML": lambda n: _recorded(model, opt, loop, n, os.path.join(out, "r.json"), True, "none", False),
        "bare": lambda n: _recorded(model, opt, loop, n, os.path.join(out, "r.json"), False, "none", False),
        "every 10": lambda n: _recorded(model, opt, loop, n, os.path.join(out, "r.json"), True, every=10),
    }
    long_steps = args.long_steps if name != "resnet50" else 0
    times = {k: [] for k in modes}
    ratios = {k: [] for k in modes}
    long_ratios = {"defaults": [], "bare": []}
    fixed, host = [], {"recorded": [], "no census": []}
    steady = {"recorded": [], "no census": []}  # steps FIRST on, against the plain loop's
    steady_host, first_ms = [], []
    for _ in range(args.rounds):
        plain_split = {}
        for k, fn in modes.items():
            times[k].append(timed(device, fn, args.steps, plain_split) if k == "plain" else fn(args.steps))
            if k == "recorded":
                fixed.append(_recorded.fixed_ms)
                if "steady" in _recorded.split:
                    first_ms.append(_recorded.split["first_ms"] - plain_split["first_ms"])
                    steady_host.append(_recorded.host_steady_us)
            if k in host:
                host[k].append(_recorded.host_us)
            if k in steady and "steady" in _recorded.split:
                steady[k].append(_recorded.split["steady"] / plain_split["steady"])
        # Each mode against the plain loop of its own round: the host's
        # speed drifts between rounds by more than the overheads measured.
        for k in modes:
            ratios[k].append(times[k][-1] / times["plain"][-1])
        if long_steps:
            # A long job at the recorder's defaults (every step of the first
            # 100, then one in 100), and bare, each against a plain loop of
            # the same length.
            plain = timed(device, loop, long_steps)
            long_ratios["defaults"].append(_recorded(model, opt, loop, long_steps, os.path.join(out, "r.json"), True,
                                                     every=None) / plain)
            long_ratios["bare"].append(_recorded(model, opt, loop, long_steps, os.path.join(out, "r.json"), False,
                                                 "none", False, every=None) / plain)
    med = {k: statistics.median(v) for k, v in times.items()}

    def over(k):
        return (statistics.median(ratios[k]) - 1) * 100

    def over_steady(k):
        return (statistics.median(steady[k]) - 1) * 100 if steady[k] else float("nan")

    def over_long(k):
        return (statistics.median(long_ratios[k]) - 1) * 100 if long_ratios[k] else float("nan")

    return {"workload": label, **{k: med[k] for k in med},
            "overhead": over("recorded"), "overhead_no_census": over("no census"),
            "overhead_sync_phase": over("sync per phase"), "overhead_no_nvml": over("no NVML"),
            "overhead_bare": over("bare"), "overhead_every10": over("every 10"),
            "overhead_long_defaults": over_long("defaults"), "overhead_long_bare": over_long("bare"),
            "overhead_steady": over_steady("recorded"), "overhead_steady_no_census": over_steady("no census"),
            "host_steady_us": statistics.median(steady_host) if steady_host else float("nan"),
            "first5_ms": statistics.median(first_ms) if first_ms else float("nan"),
            "start_end_ms": statistics.median(fixed),
            "host_us": statistics.median(host["recorded"]), "host_us_no_census": statistics.median(host["no census"])}


def _recorded(model, opt, loop, steps, path, census, sync="none", process_memory=True, every=1):
    # every=1: every step recorded (the short loops' modes); None: the
    # recorder's default.
    """ms per step of the loop inside the block: starting and ending a
    recording (the warm-up, the report's writing) is paid once per job and
    timed apart (the 'start+end' column)."""
    device = next(model.parameters()).device
    t0 = time.perf_counter()
    at = []
    _recorded.split = {}
    with memdiag.record(model, opt, output=path, census=census, sync=sync, process_memory=process_memory,
                        every=every) as rec:
        # The short loops' modes (every=1, every=10) wait after step 4 as
        # the plain loop does, the long job's do not.
        # The recorder times its hooks on a sample of the steps (every one
        # below _TIMED_ALL_BELOW, then one in _TIMED_EVERY): the steady
        # figure is its clock over the steady steps it timed.
        def timed_steps():
            return min(rec._step + 1, _recorder._TIMED_ALL_BELOW) + rec._timed_later
        if every is not None:
            _recorded.split = {"at": lambda: at.append((rec._host_ns, timed_steps()))}
        per_step = timed(device, loop, steps, _recorded.split if every is not None else None)
        if at:
            _recorded.host_steady_us = (rec._host_ns - at[0][0]) / 1e3 / max(1, timed_steps() - at[0][1])
        t1 = time.perf_counter()
    _recorded.fixed_ms = (time.perf_counter() - t0) * 1000.0 - per_step * steps
    with open(path) as f:
        note = [e["message"] for e in json.load(f)["events"] if e["message"].startswith("recorder host time")]
    _recorded.host_us = float(note[0].split(":")[1].split()[0]) if note else float("nan")
    return per_step


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--preset", default=None, help="the MLP cases' preset (default: each case's)")
    ap.add_argument("--cases", default="alpha,beta,gamma,resnet50")
    ap.add_argument("--long-steps", type=int, default=1000,
                    help="a long job's steps at the recorder's defaults and bare, per round (the MLPs; 0: none)")
    ap.add_argument("--single", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.single:
        print(json.dumps(one(args.single, args)))
        return 0
    name = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else "cpu"
    print(f"torch {torch.__version__} on {name}; {args.steps} steps x {args.rounds} rounds, medians")
    if args.device.startswith("cuda"):
        # Built here, before the workloads (each a process of its own) load it from torch's cache.
        from memdiag import _native
        print("allocator readings: " + ("native (memdiag/native/allocator_reading.cpp)" if _native.load() is not None
                                        else f"torch's Python API ({_native.why()})"))
    print(f"{'workload':28s} {'plain ms/step':>13s} {'recorded':>9s} {'overhead':>9s} {'no census':>10s} {'overhead':>9s} "
          f"{'sync/step':>10s} {'overhead':>9s} {'no NVML':>9s} {'bare':>9s} {'start+end ms':>12s} "
          f"{'host us/step':>12s} {'(no census)':>11s} {'every 10':>9s} {'long: defaults':>14s} {'bare':>7s} "
          f"{'steady: recorded':>16s} {'no census':>9s} {'host us':>7s} {'first 5 ms':>10s}")
    for case in args.cases.split(","):
        cmd = [sys.executable, os.path.abspath(__file__), "--single", case, "--device", args.device,
               "--steps", str(args.steps), "--rounds", str(args.rounds), "--long-steps", str(args.long_steps)] + (["--preset", args.preset] if args.preset else [])
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            print(f"{case:28s} failed: {p.stderr.strip().splitlines()[-1] if p.stderr.strip() else p.returncode}")
            continue
        r = json.loads(p.stdout.strip().splitlines()[-1])
        print(f"{r['workload']:28s} {r['plain']:13.3f} {r['recorded']:9.3f} {r['overhead']:8.1f}% "
              f"{r['no census']:10.3f} {r['overhead_no_census']:8.1f}% {r['sync per phase']:10.3f} "
              f"{r['overhead_sync_phase']:8.1f}% {r['overhead_no_nvml']:8.1f}% {r['overhead_bare']:8.1f}% {r['start_end_ms']:12.1f} "
              f"{r['host_us']:12.0f} {r['host_us_no_census']:11.0f} {r['overhead_every10']:8.1f}% "
              + (f"{r['overhead_long_defaults']:13.1f}% {r['overhead_long_bare']:6.1f}%"
                 if r["overhead_long_defaults"] == r["overhead_long_defaults"] else f"{'-':>14s} {'-':>7s}")
              + f" {r['overhead_steady']:15.1f}% {r['overhead_steady_no_census']:8.1f}% {r['host_steady_us']:7.0f} "
                f"{r['first5_ms']:10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
