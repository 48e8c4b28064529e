#!/usr/bin/env python3
"""The Python recorder's own host time per recorded step, on the CPU, along
the path it takes on CUDA: what memdiag's Python costs a launch-bound loop,
measured without a GPU.

    python3 scripts/recorder-host-cost.py [--cases alpha,beta,gamma] [--steps 50] [--rounds 7]
        [--modes defaults,no-census,minimal] [--width 64] [--batch 8] [--api native|python]
        [--quantile 0.2] [--root DIR] [--reports DIR] [--profile CASE:MODE [--profile-steps first]]

The recorder is made for device cuda:0 and every torch.cuda query it makes
is replaced, in this process only, by a cheap stand-in that returns
plausible numbers: the native allocator reading (memdiag/_native.py's
module: read, allocated, reset_peak), torch._C._cuda_memoryStats and
_cuda_resetPeakMemoryStats (--api python: the path without the native
reading), cudaMemGetInfo, synchronize, NVML (a pynvml module that
answers for this process), the device's properties. The figures the
stand-ins give follow a fake allocator that the loop itself moves at its
own points (the batch, the forward's activations, the gradients, the
optimizer's state, a reserve that grows and memory made outside the
allocator now and then), so a report's figures depend on where in the loop
the recorder read, not on how many times it did. The census counts the
model's CPU tensors as the device's (memdiag._census._cuda_flag answers
False for cuda: the same per-tensor work). What is left is memdiag's own
Python: the hooks' bookkeeping, the census, the readings' handling, the
loss copy (on the CPU a loss is read with .item(); the CUDA copy's tensor
calls are timed apart, under "calls"), the kept walks at the cleanups of
steps 1-4 and the modules' readings on steps 0 and 1. What the device's
own calls cost (the native reading, cudaMemGetInfo, NVML, the loss's copy
to page-locked memory) is not here: the stand-ins' calls a steady step say
how many a step still makes.

The models are memdiag's MLP cases (cases/*.json, their default presets,
their optimizers and graph settings, as scripts/recorder-overhead.py runs
them) with their widths shrunk to --width, so that the loop's own compute
is small beside the recorder's work: what the recorder does depends on
the number of parameters, modules and phases, not on their sizes.

Modes: defaults; no-census (census=False); minimal (census, NVML, kept
and modules off). In alternating rounds, a plain loop and a recording of
each mode, every step recorded. Two clocks:
- own: the recorder's host time (what its report's note adds up), read
  around each of the loop's calls (the model's forward, backward, step,
  zero_grad): per call of a steady step (steps 5 on), a steady step in all,
  the first 5 steps (ms in all: the modules' readings at steps 0 and 1, the
  kept walks at 1-4) and a step on average over the recording;
- by call: the thread's CPU time of each of the loop's calls, recorded less
  plain (torch's dispatch of the hooks included), likewise.
A figure is a low quantile (--quantile) over steps and rounds, plain and
recorded alike: what runs beside the benchmark on a shared machine only
adds. Then starting and ending the recording (ms), and the stand-ins'
calls a steady step.

--root DIR measures the recorder of another checkout's python/ (an earlier
commit's: git archive COMMIT python VERSION | tar -x -C DIR). --reports DIR
writes each case and mode's first report with its times taken out (two
versions' must be identical). --profile CASE:MODE prints cProfile's view of
memdiag's functions over the steady steps of a recording (--profile-steps
first: steps 0-4).
"""
import argparse
import copy
import cProfile
import gc
import io
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
import types
from collections import Counter

import torch
import torch.nn.functional as F

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
# --root DIR: the recorder of another checkout (an earlier commit's python/,
# say from `git archive COMMIT python | tar -x -C DIR`), measured the same way.
if "--root" in sys.argv[:-1]:
    sys.path.insert(0, os.path.join(os.path.abspath(sys.argv[sys.argv.index("--root") + 1]), "python"))
else:
    sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "python", "examples"))
import memdiag  # noqa: E402
from memdiag import _census, _native  # noqa: E402
from memdiag import _recorder  # noqa: E402
_recorder._TIMED_EVERY = 1  # its clock read at every step, as this script reads it

MIB = 1 << 20
GIB = 1 << 30
STEADY_FROM = 5  # steps 0-4: the modules' readings (0, 1) and the kept walks (1-4)

CALLS = Counter()  # stand-in calls
OWN_CLOCK = [None]  # while a recorder records: its own clock (ns), read around each of the loop's calls


def counted(name, fn):
    def call(*args, **kwargs):
        CALLS[name] += 1
        return fn(*args, **kwargs)
    return call


class FakeAllocator:
    """The caching allocator's figures as the loop moves them (bytes)."""

    def __init__(self):
        self.allocated = self.peak = 0
        self.reserved = 0
        self.retries = 0
        self.context = 500 * MIB  # the CUDA context, outside the allocator
        self.total = 141 * GIB

    def set(self, nbytes):
        self.allocated = nbytes
        self.peak = max(self.peak, nbytes)
        self.reserved = max(self.reserved, (nbytes + 2 * MIB - 1) // (2 * MIB) * 2 * MIB)

    def used(self):
        return self.reserved + self.context

    # the native module (memdiag/native/allocator_reading.cpp)
    def read(self, device, reset_peak, device_used):
        out = (self.allocated, self.peak, self.reserved, self.reserved - self.allocated, self.retries,
               self.used() if device_used else -1)
        if reset_peak:
            self.peak = self.allocated
        return out

    def allocated_now(self, device):
        return self.allocated

    def reset_peak(self, device=None):
        self.peak = self.allocated

    def largest_cached_block(self, device):
        return self.reserved - self.allocated

    # torch's Python API
    def memory_stats(self, device):
        def stat(current, peak):
            return {k: {"current": current, "peak": peak, "allocated": 0, "freed": 0}
                    for k in ("all", "small_pool", "large_pool")}
        return {"allocated_bytes": stat(self.allocated, self.peak), "reserved_bytes": stat(self.reserved, self.reserved),
                "inactive_split_bytes": stat(self.reserved - self.allocated, 0),
                "active_bytes": stat(self.allocated, self.peak), "requested_bytes": stat(self.allocated, self.peak),
                "num_alloc_retries": self.retries, "num_ooms": 0}

    def mem_get_info(self, device=None):
        return self.total - self.used(), self.total


ALLOC = FakeAllocator()


def native_census():
    """The native reading's gradient_bytes, built here with
    torch.utils.cpp_extension from python/memdiag/native/allocator_reading.cpp
    (the CUDA toolkit's nvcc and headers; no device needed to load it)."""
    from torch.utils import cpp_extension
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
    t = time.perf_counter()
    source = os.path.join(os.path.dirname(_native.__file__), "native", "allocator_reading.cpp")
    module = cpp_extension.load(name="memdiag_allocator_reading", sources=[source], extra_cflags=["-O2"],
                                with_cuda=True, verbose=False)
    print(f"native census: {module.__file__} ({time.perf_counter() - t:.1f} s to build or load)")
    return module.gradient_bytes


def install_stand_ins(api, gradient_bytes=None):
    fake = ALLOC
    def read(device, reset_peak, device_used):
        CALLS["native.read"] += 1
        if device_used:
            CALLS["native.read with cudaMemGetInfo"] += 1
        return fake.read(device, reset_peak, device_used)

    native = types.SimpleNamespace(read=read, **({"gradient_bytes": gradient_bytes} if gradient_bytes else {}),
                                   allocated=counted("native.allocated", fake.allocated_now),
                                   reset_peak=counted("native.reset_peak", fake.reset_peak),
                                   largest_cached_block=fake.largest_cached_block)
    _native.load = (lambda: native) if api == "native" else (lambda: None)
    _native.why = lambda: None if api == "native" else "stand-in: torch's Python API"
    torch._C._cuda_memoryStats = counted("_cuda_memoryStats", fake.memory_stats)
    torch._C._cuda_resetPeakMemoryStats = counted("_cuda_resetPeakMemoryStats", fake.reset_peak)
    torch._C._cuda_attach_out_of_memory_observer = lambda observer: None
    cudart = types.SimpleNamespace(cudaMemGetInfo=counted("cudaMemGetInfo", fake.mem_get_info))
    torch.cuda.cudart = lambda: cudart
    torch.cuda.mem_get_info = counted("mem_get_info", fake.mem_get_info)
    torch.cuda.synchronize = counted("synchronize", lambda device=None: None)
    torch.cuda.current_device = lambda: 0
    torch.cuda.memory_allocated = counted("memory_allocated", lambda device=None: fake.allocated)
    torch.cuda.max_memory_allocated = counted("max_memory_allocated", lambda device=None: fake.peak)
    torch.cuda.get_device_properties = lambda device=None: types.SimpleNamespace(name="stand-in H200",
                                                                                 total_memory=fake.total)
    torch.cuda.get_per_process_memory_fraction = lambda device=None: 1.0
    pynvml = types.ModuleType("pynvml")
    pynvml.nvmlInit = lambda: None
    pynvml.nvmlDeviceGetHandleByIndex = lambda index: ("handle", index)
    pynvml.nvmlSystemGetDriverVersion = lambda: "stand-in"
    pynvml.nvmlDeviceGetComputeRunningProcesses = counted(
        "nvml processes", lambda handle: [types.SimpleNamespace(pid=os.getpid(), usedGpuMemory=fake.used() - 300 * MIB)])
    sys.modules["pynvml"] = pynvml
    # Page-locked memory needs a driver: the loss buffer's chunks are plain here.
    empty = torch.empty

    def unpinned_empty(*args, pin_memory=False, **kwargs):
        return empty(*args, **kwargs)
    torch.empty = unpinned_empty
    # The census counts the CPU tensors as the device's (the same work a tensor).
    _census._cuda_flag = lambda device_type: None if device_type is None else False


def workload(case_name, width, batch):
    import mlp_job
    case = json.load(open(os.path.join(ROOT, "cases", case_name + ".json")))
    preset = case["default_preset"]
    shrunk = copy.deepcopy(case)
    m = shrunk["presets"][preset]["model"]
    if width:
        m["input_dim"] = m["hidden_dim"] = width
    torch.manual_seed(0)
    model, m = mlp_job.build(shrunk, preset)
    opt = mlp_job.optimizer_for(shrunk, model)
    batch = batch or case["presets"][preset]["batch_size"]
    graph = case.get("graph", {})
    retain, keep = graph.get("retain_graph", False), graph.get("keep_graph_connected_loss", False)
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    # The thread's CPU time, not the wall's: on a shared machine a call's
    # wall time holds whatever ran beside it.
    ns = time.thread_time_ns
    fake = ALLOC

    def loop(steps, times, before_step=None):
        """times gets, per step, the ns of (forward, backward, step, zero_grad);
        before_step(i), if given, is called before each step."""
        # The collector's automatic passes off while the loop runs (plain and
        # recorded): where they fall is chance, and the recorder freezes the
        # process's objects at its start (memdiag/_kept.py), which makes
        # them cheaper in a recorded loop than in a plain one. Its own
        # collections (the kept walks) run as they do.
        gc.collect()
        gc.disable()
        try:
            run(steps, times, before_step)
        finally:
            gc.enable()

    def run(steps, times, before_step):
        kept = []
        state = 0
        clock = OWN_CLOCK[0] or (lambda: 0)
        for i in range(steps):
            if before_step is not None:
                before_step(i)
            x = torch.randn(batch, m["input_dim"])
            y = torch.randint(0, m["output_dim"], (batch,))
            if i % 10 == 3:
                fake.reserved += 2 * MIB  # the allocator's reserve moved
            if i % 10 == 7:
                fake.context += MIB  # memory made outside the allocator (a library's workspace)
            fake.set(params + state + 64 * 1024)  # the batch
            o0 = clock()
            t0 = ns()
            out = model(x)
            t1 = ns()
            o1 = clock()
            fake.set(params + state + 64 * 1024 + 8 * MIB)  # the forward's activations, the loss
            loss = F.cross_entropy(out, y)
            o2 = clock()
            t2 = ns()
            loss.backward(retain_graph=retain)
            t3 = ns()
            o3 = clock()
            fake.set(params + state + params + 64 * 1024)  # the gradients
            if keep:
                kept.append(loss)
            t4a = ns()
            opt.step()
            t4 = ns()
            o4 = clock()
            state = params if opt.state else 0
            fake.set(params + state + params + 64 * 1024)
            del x, y, out, loss
            t5a = ns()
            opt.zero_grad(set_to_none=True)
            t5 = ns()
            o5 = clock()
            fake.set(params + state)
            # per step: the loop's calls (forward, backward, step, zero_grad), then the recorder's own clock in each
            times.append((t1 - t0, t3 - t2, t4 - t4a, t5 - t5a, o1 - o0, o3 - o2, o4 - o3, o5 - o4))

    label = f"{case_name} {preset} ({len(list(model.parameters()))} params, {len(list(model.modules()))} modules)"
    return model, opt, loop, label


MODES = {
    "defaults": {},
    "no-census": {"census": False},
    "minimal": {"census": False, "process_memory": False, "kept": False, "modules": False},
}


def recorded(model, opt, loop, steps, mode, path, times, profile=None, profile_first=False):
    options = dict(MODES[mode])
    rec = memdiag.record(model, opt, output=path, every=1, warmup=False, device="cuda:0", **options)
    ns = time.perf_counter_ns
    t = ns()
    rec.start()
    start_ms = (ns() - t) / 1e6
    CALLS.clear()
    at = {}
    own = []  # the recorder's own clock before each step

    def before_step(i):
        own.append(rec._host_ns)
        if i == 0 and profile is not None and profile_first:
            profile.enable()
        if i == STEADY_FROM:
            at["calls"] = dict(CALLS)
            if profile is not None:
                (profile.disable if profile_first else profile.enable)()

    OWN_CLOCK[0] = lambda: rec._host_ns
    try:
        loop(steps, times, before_step)
    finally:
        OWN_CLOCK[0] = None
    if profile is not None and not profile_first:
        profile.disable()
    own.append(rec._host_ns)
    own_steps = [b - a for a, b in zip(own, own[1:])]
    # The modules' hooks keep their own clock, added to the recorder's when it ends.
    modules_ns = getattr(getattr(rec, "_modules", None), "ns", 0) or 0
    steady_calls = {k: (v - at["calls"].get(k, 0)) / (steps - STEADY_FROM) for k, v in CALLS.items()}
    t = ns()
    rec.finish()
    end_ms = (ns() - t) / 1e6
    with open(path) as f:
        report = json.load(f)
    note = [e["message"] for e in report["events"] if e["message"].startswith("recorder host time")]
    host_us = float(note[0].split(":")[1].split()[0]) if note else float("nan")
    return report, start_ms, end_ms, (host_us, own_steps, modules_ns), steady_calls


def normalised(report):
    """The report without what varies from run to run (times, the host)."""
    import re
    r = copy.deepcopy(report)
    for s in r["samples"]:
        s.pop("elapsed_ms", None)
    for k in ("start_time", "host"):
        r["environment"].pop(k, None)
    events = []
    for e in r["events"]:
        if e["message"].startswith("recorder host time"):
            continue
        e["message"] = re.sub(r"walked at the cleanups of steps ([0-9, ]+): [0-9]+ ms", r"walked at \1: N ms",
                              e["message"])
        events.append(e)
    r["events"] = events
    return r


def median(values):
    return statistics.median(values) if values else float("nan")


QUANTILE = [0.2]


def low(values):
    """A low quantile (--quantile): what ran beside the benchmark on a
    shared machine only ever adds time, so the lower figures are the
    undisturbed ones; the same quantile for the plain and the recorded loop."""
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(QUANTILE[0] * len(v)))]


def one_case(name, args, out):
    model, opt, loop, label = workload(name, args.width, args.batch)
    loop(3, [])  # the optimizer's state, the allocator's first blocks
    modes = args.modes.split(",")
    plain = []
    rec_times = {m: [] for m in modes}  # per round: per step: (fwd, bwd, step, zero)
    extra = {m: {"start": [], "end": [], "host": [], "own": [], "modules": [], "calls": None} for m in modes}
    for r in range(args.rounds):
        t = []
        loop(args.steps, t)
        plain.append(t)
        for mode in modes:
            t = []
            report, start_ms, end_ms, host_us, calls = recorded(model, opt, loop, args.steps, mode,
                                                                os.path.join(out, f"{name}-{mode}.json"), t)
            rec_times[mode].append(t)
            extra[mode]["start"].append(start_ms)
            extra[mode]["end"].append(end_ms)
            extra[mode]["host"].append(host_us[0])
            extra[mode]["own"].append(host_us[1])
            extra[mode]["modules"].append(host_us[2])
            extra[mode]["calls"] = calls
            if r == 0 and args.reports:
                os.makedirs(args.reports, exist_ok=True)
                with open(os.path.join(args.reports, f"{name}-{mode}.json"), "w") as f:
                    json.dump(normalised(report), f, indent=1, sort_keys=True)
    plain_call = [low([s[i] for t in plain for s in t[STEADY_FROM:]]) for i in range(4)]
    plain_step = [low([sum(t[k][:4]) for t in plain]) for k in range(args.steps)]
    rows = []
    for mode in modes:
        rounds = rec_times[mode]
        steady = [low([s[i] for t in rounds for s in t[STEADY_FROM:]]) - plain_call[i] for i in range(4)]
        # Per step index, over rounds, less the plain step's.
        by_step = [low([sum(t[k][:4]) for t in rounds]) - plain_step[k] for k in range(args.steps)]
        first = sum(by_step[:STEADY_FROM])
        if os.environ.get("HOST_COST_DEBUG"):
            print(mode, [round(v / 1e3) for v in by_step[:8]])
        average = statistics.mean(by_step)
        own_call = [low([s[4 + i] for t in rounds for s in t[STEADY_FROM:]]) for i in range(4)]
        rows.append({"mode": mode, "steady_us": [v / 1e3 for v in steady], "first5_us": first / 1e3,
                     "own_call_us": [v / 1e3 for v in own_call],
                     "average_us": average / 1e3, "host_us": median(extra[mode]["host"]),
                     "own_steady_us": low([d for t in extra[mode]["own"] for d in t[STEADY_FROM:]]) / 1e3,
                     "own_by_step_us": [low([t[k] for t in extra[mode]["own"]]) / 1e3 for k in range(args.steps)],
                     "own_modules_us": median(extra[mode]["modules"]) / 1e3,
                     "start_ms": median(extra[mode]["start"]), "end_ms": median(extra[mode]["end"]),
                     "calls": extra[mode]["calls"]})
    return label, sum(plain_call) / 1e3, rows


def profile_case(spec, args, out):
    name, mode = spec.split(":")
    model, opt, loop, label = workload(name, args.width, args.batch)
    loop(3, [])
    prof = cProfile.Profile()
    first = args.profile_steps == "first"
    recorded(model, opt, loop, args.steps, mode, os.path.join(out, "p.json"), [], profile=prof, profile_first=first)
    s = io.StringIO()
    stats = pstats.Stats(prof, stream=s)
    stats.sort_stats("cumulative").print_stats("python/memdiag/", 45)
    if os.environ.get("HOST_COST_DEBUG"):
        stats.sort_stats("tottime").print_stats(25)
    steps = f"0-{STEADY_FROM - 1}" if first else f"{STEADY_FROM}-{args.steps - 1}"
    print(f"cProfile, {label}, mode {mode}, steps {steps} (times per call include the profiler's own)")
    print(s.getvalue())


def call_costs():
    """The CUDA loss copy's tensor calls (memdiag/_losses.py: the CPU's
    loss takes the other branch, .item()), timed on CPU tensors: what the
    copy asked of torch's Python binding before 2026-12-04, and now."""
    import timeit
    loss = torch.tensor(2.5, requires_grad=True) * 1.0
    chunk = torch.empty(1024)
    slots = chunk.unbind(0)
    enabled, set_enabled = torch._C.is_grad_enabled, torch._C._set_grad_enabled

    def now():
        e = enabled()
        set_enabled(False)
        try:
            slots[3].copy_(loss if loss.dim() == 0 else loss.reshape(()), non_blocking=True)
        finally:
            set_enabled(e)

    n = 20000
    for label, fn in (("loss copy before: chunk[s:s+1].copy_(loss.detach().reshape(1), non_blocking=True)",
                       lambda: chunk[3:4].copy_(loss.detach().reshape(1), non_blocking=True)),
                      ("loss copy now: slots[s].copy_(loss, non_blocking=True), grad mode off around it", now)):
        t = min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6
        print(f"  {label}: {t:.1f} us")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="alpha,beta,gamma")
    ap.add_argument("--modes", default="defaults,no-census,minimal")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--width", type=int, default=64, help="the MLPs' input and hidden width (0: the case's)")
    ap.add_argument("--batch", type=int, default=8, help="samples a step (0: the case's)")
    ap.add_argument("--api", choices=("native", "python"), default="native",
                    help="the allocator's figures from the native reading (the default on CUDA) or torch's Python API")
    ap.add_argument("--reports", help="write each case and mode's first report here, its times taken out")
    ap.add_argument("--profile", metavar="CASE:MODE")
    ap.add_argument("--quantile", type=float, default=0.2,
                    help="the quantile of a call's times taken, plain and recorded alike (default 0.2)")
    ap.add_argument("--native-census", action="store_true",
                    help="the census's gradients counted by the native reading's gradient_bytes, built here "
                         "(torch.utils.cpp_extension, the CUDA toolkit; the stand-in reading has none otherwise)")
    ap.add_argument("--root", help="the checkout whose python/memdiag is measured (default: this one's)")
    ap.add_argument("--profile-steps", choices=("steady", "first"), default="steady",
                    help="--profile: the steady steps (5 on) or the first 5")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    QUANTILE[0] = args.quantile
    install_stand_ins(args.api, native_census() if args.native_census else None)
    out = tempfile.mkdtemp(prefix="memdiag-host-cost-")
    if args.profile:
        profile_case(args.profile, args, out)
        return 0
    print(f"memdiag {memdiag.__version__} from {os.path.dirname(memdiag.__file__)}")
    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}, CPU; stand-ins for CUDA ({args.api} readings); "
          f"width {args.width or 'the case'}, batch {args.batch or 'the case'}; {args.steps} steps x {args.rounds} "
          f"rounds, every step recorded; times: the {args.quantile:g} quantile over steps and rounds")
    print("own clock: the recorder's host time (what its report's note adds up), us: in each of the loop's calls "
          "of a steady step (steps 5 on: forward, backward, step, zero_grad), a steady step in all, the first 5 "
          "steps (ms in all), a step on average over the recording (what its note says)")
    print("by call: the loop's calls, recorded less plain (the thread's CPU time: torch's hook dispatch included), "
          "us, likewise; then starting and ending the recording (ms) and the stand-ins' calls a steady step")
    head = (f"{'case / mode':46s} {'own: fwd':>8s} {'bwd':>5s} {'step':>5s} {'zero':>5s} {'steady':>6s} {'first5':>6s} "
            f"{'avg':>5s} | {'plain us':>8s} {'fwd':>6s} {'bwd':>6s} {'step':>6s} {'zero':>6s} {'steady':>7s} "
            f"{'first5':>6s} {'avg':>6s} | {'start ms':>8s} {'end ms':>7s}  stand-in calls a steady step")
    print(head)
    for name in args.cases.split(","):
        label, plain_us, rows = one_case(name, args, out)
        for r in rows:
            calls = ", ".join(f"{k} {v:g}" for k, v in sorted(r["calls"].items()))
            own_first5_ms = (sum(r["own_by_step_us"][:STEADY_FROM]) + r["own_modules_us"]) / 1e3
            own_avg = (sum(r["own_by_step_us"]) + r["own_modules_us"]) / args.steps
            print(f"{label + ' / ' + r['mode']:46s} " + " ".join(f"{v:{w}.1f}" for v, w in zip(r["own_call_us"], (8, 5, 5, 5))) +
                  f" {r['own_steady_us']:6.1f} {own_first5_ms:6.2f} {own_avg:5.0f} | "
                  f"{plain_us:8.0f} " + " ".join(f"{v:6.1f}" for v in r["steady_us"]) +
                  f" {sum(r['steady_us']):7.1f} {r['first5_us'] / 1e3:6.2f} {r['average_us']:6.1f} | "
                  f"{r['start_ms']:8.1f} {r['end_ms']:7.1f}  {calls}")
    print("calls (us, CPU tensors, idle):")
    call_costs()
    return 0


if __name__ == "__main__":
    sys.exit(main())
