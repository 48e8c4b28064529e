"""The Python recorder on CUDA (ctest label gpu; skips without a device):
the reference workloads written in plain PyTorch against memory_diagnostics'
runs of the same case files, phase by phase; a real out-of-memory error
under a limit; a library model (torchvision's ResNet-50, transformers'
GPT-2) recorded, and pushed out of memory.

MEMDIAG_RESULTS_DIR, when set, receives the reports and a table of the
per-phase differences (for the closing notes and docs/measurements).
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BIN = os.environ.get("MEMDIAG_BIN", "")
MIB = float(1 << 20)
CASES = [os.path.join(ROOT, "cases", c + ".json") for c in ("alpha", "beta", "gamma")] + \
        [os.path.join(ROOT, "tests", "cases", "own.json")]


def need_cuda():
    if not torch.cuda.is_available():
        raise unittest.SkipTest("no CUDA device: the Python recorder's CUDA tests need one")
    if not BIN:
        raise unittest.SkipTest("MEMDIAG_BIN is not set (build/bin)")


class Cuda(unittest.TestCase):
    def setUp(self):
        need_cuda()
        self.results = os.environ.get("MEMDIAG_RESULTS_DIR")
        if self.results:
            os.makedirs(self.results, exist_ok=True)
            self.dir = self.results
        else:
            t = tempfile.TemporaryDirectory()
            self.addCleanup(t.cleanup)
            self.dir = t.name

    def path(self, name):
        return os.path.join(self.dir, name)

    def load(self, name):
        with open(self.path(name)) as f:
            return json.load(f)

    def run_cmd(self, cmd, ok=True):
        p = subprocess.run(cmd, capture_output=True, text=True)
        if ok:
            self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-4000:])
        return p

    def verdict(self, *names):
        p = self.run_cmd([os.path.join(BIN, "compare_memory_reports"), "--format", "json",
                          *[self.path(n) for n in names]], ok=False)
        self.assertIn(p.returncode, (0, 1), p.stderr)
        return json.loads(p.stdout)["groups"][0]

    def job(self, case, out, *extra, ok=True):
        return self.run_cmd([sys.executable, os.path.join(ROOT, "python", "examples", "mlp_job.py"), case,
                             "--device", "cuda", "-o", self.path(out), *extra], ok=ok)

    def diagnostics(self, case, out, *extra, ok=True):
        return self.run_cmd([os.path.join(BIN, "memory_diagnostics"), "--case", case, "--device", "cuda",
                             "-o", self.path(out), *extra], ok=ok)

    def note(self, name, text):
        if self.results:
            with open(self.path(name), "a") as f:
                f.write(text + "\n")
        print(text)


class ReferenceWorkloads(Cuda):
    def test_the_same_phases_memory_losses_and_verdicts_as_memory_diagnostics(self):
        self.note("phases.txt", f"{'case':8s} {'phases':>6s} {'max |d alloc|':>13s} {'max |d peak|':>12s} "
                                f"{'(step 0 peak)':>13s} {'max |d reserved|':>16s} {'loss':>9s} verdict")
        for case in CASES:
            name = os.path.splitext(os.path.basename(case))[0]
            with self.subTest(case=name):
                self.job(case, f"{name}-python.json")
                self.diagnostics(case, f"{name}-memdiag.json")
                py, cpp = self.load(f"{name}-python.json"), self.load(f"{name}-memdiag.json")
                key = [(s["phase"], s["step"]) for s in py["samples"]]
                self.assertEqual(key, [(s["phase"], s["step"]) for s in cpp["samples"]])
                d_alloc = d_peak = d_res = d_first = d_loss = 0.0
                for a, b in zip(py["samples"], cpp["samples"]):
                    d_alloc = max(d_alloc, abs(a["allocated_mib"] - b["allocated_mib"]))
                    d_res = max(d_res, abs(a["reserved_mib"] - b["reserved_mib"]))
                    d = abs(a["peak_allocated_mib"] - b["peak_allocated_mib"])
                    if (a["phase"], a["step"]) == ("step", 0):
                        d_first = d  # torch.optim makes all state before its loop (test_recorder.peak_slack)
                    else:
                        d_peak = max(d_peak, d)
                    if "loss" in b:
                        d_loss = max(d_loss, abs(a["loss"] - b["loss"]) / abs(b["loss"]))
                ours, theirs = self.verdict(f"{name}-python.json"), self.verdict(f"{name}-memdiag.json")
                self.note("phases.txt", f"{name:8s} {len(key):6d} {d_alloc:13.4f} {d_peak:12.4f} {d_first:13.4f} "
                                        f"{d_res:16.4f} {d_loss:9.1e} {ours['dominant_cause']} / "
                                        f"{theirs['dominant_cause']}")
                self.assertLessEqual(d_alloc, 1.0)
                self.assertLessEqual(d_peak, 1.0)
                self.assertLessEqual(d_first, py["model"]["largest_module_bytes"] / MIB)
                self.assertLess(d_loss, 1e-5)
                self.assertEqual(ours["dominant_cause"], theirs["dominant_cause"])
                self.assertTrue(all(s["reserved_mib"] is not None and s["device_used_mib"] is not None
                                    for s in py["samples"]))

    def test_the_native_reading_reads_what_torchs_python_api_reads(self):
        sys.path.insert(0, os.path.join(ROOT, "python"))
        from memdiag import _native
        native = _native.load()
        self.assertIsNotNone(native, f"the native allocator reading was not built: {_native.why()}")
        index = torch.cuda.current_device()
        kept = []
        for k in range(6):
            kept.append(torch.empty((k + 1) << 20, device="cuda"))  # 4, 8, ... 24 MiB
            if k % 2:
                del kept[0]  # frees, so the cache and the split blocks move too
            torch._C._cuda_resetPeakMemoryStats(index)
            torch.empty(3 << 20, device="cuda")  # a peak above what stays
            a, peak, reserved, inactive, retries, used = native.read(index, False, True)
            s = torch._C._cuda_memoryStats(index)
            free, total = torch.cuda.mem_get_info(index)
            self.assertEqual((a, peak, reserved, inactive, retries),
                             (s["allocated_bytes"]["all"]["current"], s["allocated_bytes"]["all"]["peak"],
                              s["reserved_bytes"]["all"]["current"], s["inactive_split_bytes"]["all"]["current"],
                              s["num_alloc_retries"]))
            self.assertEqual(native.allocated(index), a)
            self.assertLessEqual(abs(used - (total - free)), 64 << 20)  # another process may move the device
            self.assertEqual(native.read(index, False, False)[5], -1)
        native.read(index, True, False)
        self.assertEqual(torch.cuda.max_memory_allocated(index), torch.cuda.memory_allocated(index))

    def test_the_native_census_counts_the_gradients_python_counts(self):
        sys.path.insert(0, os.path.join(ROOT, "python"))
        from memdiag import _census, _native
        native = _native.load()
        self.assertIsNotNone(native, f"the native allocator reading was not built: {_native.why()}")
        model = torch.nn.Sequential(*[torch.nn.Linear(64, 64) for _ in range(4)]).cuda()
        model(torch.randn(8, 64, device="cuda")).sum().backward()
        params = list(model.parameters())
        bucket = torch.zeros(100000, device="cuda")  # gradients as views of one storage (DDP's bucket views)
        params[0].grad = bucket[:params[0].numel()].view_as(params[0])
        params[1].grad = bucket[5000:5000 + params[1].numel()].view_as(params[1])
        params[2].grad = None
        on_cpu = torch.nn.Parameter(torch.zeros(5))  # counted off the device only
        on_cpu.grad = torch.ones(5)
        for ps in (params, params + [on_cpu] + params[:2], [], [on_cpu]):
            for device_type, flag in (("cuda", 1), ("cpu", 0), (None, -1)):
                self.assertEqual(native.gradient_bytes(ps, flag) / MIB, _census.gradients_mib(ps, device_type),
                                 (len(ps), device_type))
        for p in params:
            p.grad = None
        self.assertEqual(native.gradient_bytes(params, 1), 0)

    def test_the_native_host_reading_and_losses_read_what_python_reads(self):
        sys.path.insert(0, os.path.join(ROOT, "python"))
        from memdiag import _losses, _native, _probe
        native = _native.load()
        self.assertIsNotNone(native, f"the native allocator reading was not built: {_native.why()}")
        pinned = torch.empty(3 << 20, pin_memory=True)  # the host allocator holds it
        statm, held = _probe.HostReader().read(True)   # Python's reading
        r = _probe.HostReader(native)
        pages, held_native = r.read(True)
        self.assertIsInstance(pages, int)
        self.assertEqual(held_native, held)
        self.assertEqual(held_native, torch._C._cuda_hostMemoryStats()["allocated_bytes"]["current"])
        self.assertGreaterEqual(held_native, pinned.numel() * 4)
        self.assertLess(abs(r.resident_mib(pages) - r.resident_mib(statm)), 64)  # the same process, moments apart
        self.assertIsNone(r.read(False)[1])
        # Losses of every floating dtype, more than one chunk of them, read
        # back as Python reads them; a loss the native copy declines (an
        # integer) is kept the Python way, in order.
        buf = _losses.LossBuffer("cuda", native)
        self.assertIsNotNone(buf._native)
        expected = []
        for k in range(2600):
            dtype = (torch.float32, torch.bfloat16, torch.float16, torch.float64)[k % 4]
            t = (torch.randn((), device="cuda") * 3).to(dtype)
            if k % 4 == 3:
                t = t.reshape(1)  # one element, not a scalar
            expected.append(float(t.float().item()) if k % 4 != 3 else float(t.item()))
            buf.add(t)
        buf.add(7)
        expected.append(7.0)
        torch.cuda.synchronize()
        self.assertEqual(buf.values(), expected)
        del pinned

    def test_the_steady_lane_reads_what_the_python_reads(self):
        """The same 40 steps recorded in two fresh processes, with the
        steady lane (memdiag/_lane.py) and without it: every allocator
        figure, size, census count and loss the same."""
        job = self.path("lane_job.py")
        with open(job, "w") as f:
            f.write(_LANE_JOB)
        reports = {}
        for lane in ("1", "0"):
            out = self.path(f"lane-{lane}.json")
            env = dict(os.environ, MEMDIAG_NATIVE_LANE=lane, PYTHONPATH=os.path.join(ROOT, "python"))
            p = subprocess.run([sys.executable, job, out], capture_output=True, text=True, env=env)
            self.assertEqual(p.returncode, 0, p.stdout[-2000:] + p.stderr[-4000:])
            engaged = int(p.stdout.strip().splitlines()[-1])
            self.assertEqual(engaged > 0, lane == "1", p.stdout)
            with open(out) as f:
                reports[lane] = json.load(f)
        keys = ("phase", "step", "allocated_mib", "reserved_mib", "peak_allocated_mib", "inactive_split_mib",
                "alloc_retries", "samples", "tokens", "tensors", "micro_batch")
        a = [{k: s.get(k) for k in keys} for s in reports["1"]["samples"]]
        b = [{k: s.get(k) for k in keys} for s in reports["0"]["samples"]]
        self.assertEqual(len(a), 2 + 4 * 40)
        self.assertEqual(a, b)
        la = [s.get("loss") for s in reports["1"]["samples"]]
        lb = [s.get("loss") for s in reports["0"]["samples"]]
        self.assertEqual([x is None for x in la], [x is None for x in lb])
        for x, y in zip(la, lb):
            if x is not None:
                self.assertAlmostEqual(x, y, places=5)

    def test_out_of_memory_under_a_limit_names_the_failing_phase(self):
        # alpha at a batch whose forward cannot fit 600 MiB (a limit no issue names).
        case = CASES[0]
        p = self.job(case, "alpha-oom-python.json", "--batch-size", "16384", "--memory-limit-mib", "600", ok=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("OutOfMemoryError", p.stderr)  # the error still reached the script's caller
        self.diagnostics(case, "alpha-oom-memdiag.json", "--batch-size-per-device", "16384", "--memory-limit-mib",
                         "600", ok=False)
        py, cpp = self.load("alpha-oom-python.json"), self.load("alpha-oom-memdiag.json")
        self.assertEqual(py["status"], "oom")
        ev = [e for e in py["events"] if e["kind"] == "oom"][0]
        ev_cpp = [e for e in cpp["events"] if e["kind"] == "oom"][0]
        self.assertEqual((ev["phase"], ev["step"]), (ev_cpp["phase"], ev_cpp["step"]))
        o = ev["oom"]
        self.assertGreater(o["request_mib"], 0)
        self.assertAlmostEqual(o["limit_mib"], 600, delta=1)
        self.assertLessEqual(o["reserved_mib"], 600 + 2)
        self.assertGreater(o["reserved_mib"] + o["request_mib"], 600 - o["largest_free_block_mib"] - 2)
        for k in ("device_free_mib", "allocated_mib", "inactive_split_mib", "num_alloc_retries", "num_ooms"):
            self.assertIsNotNone(o[k], k)
        self.assertEqual(self.verdict("alpha-oom-python.json")["dominant_cause"],
                         self.verdict("alpha-oom-memdiag.json")["dominant_cause"])
        self.note("oom.txt", f"alpha b16384 at 600 MiB: python {ev['phase']} step {ev['step']}: {ev['message'][:90]}; "
                             f"request {o['request_mib']:.2f}, allocated {o['allocated_mib']:.2f}, reserved "
                             f"{o['reserved_mib']:.2f}, memdiag {ev_cpp['phase']} step {ev_cpp['step']}")


_SCRIPT_HEADER = f"""
import os, sys, pickle
import torch
import torch.nn.functional as F
sys.path.insert(0, {os.path.join(ROOT, "python")!r})
import memdiag
"""


class RecorderOnTheDevice(Cuda):
    def python(self, body):
        return self.run_cmd([sys.executable, "-c", _SCRIPT_HEADER + body], ok=False)

    def test_the_default_settings_never_wait_for_the_device(self):
        # torch.cuda.set_sync_debug_mode("error") makes PyTorch's implicit
        # synchronisations raise (.item(), a copy to pageable host memory;
        # not an explicit torch.cuda.synchronize()): a loop of plain
        # launches recorded with the defaults must still run, and its losses
        # still arrive (read when recording ends). The same loop with a
        # float(loss) in it must fail, or the test could not fail.
        body = """
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(64, 512, device="cuda"); y = torch.randint(0, 10, (64,), device="cuda")
with memdiag.record(model, opt, output=OUT):
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            if READ:
                float(loss)
            opt.step()
            opt.zero_grad(set_to_none=True)
    finally:
        torch.cuda.set_sync_debug_mode("default")
"""
        p = self.python(f"OUT = {self.path('nosync.json')!r}\nREAD = False\n" + body)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        r = self.load("nosync.json")
        self.assertEqual(r["status"], "complete")
        losses = [s["loss"] for s in r["samples"] if s["phase"] == "step"]
        self.assertEqual(len(losses), 3)
        self.assertTrue(all(0 < v < 10 for v in losses), losses)
        self.assertTrue(any(e["kind"] == "note" and e["message"].startswith("recorder host time")
                            for e in r["events"]))
        p = self.python(f"OUT = {self.path('sync-read.json')!r}\nREAD = True\n" + body)
        self.assertNotEqual(p.returncode, 0, "float(loss) synchronised without the debug mode noticing")
        self.assertIn("synchroniz", p.stderr)

    def test_a_kept_tensor_is_named_by_the_line_that_allocated_it(self):
        # Predictions the loop makes and keeps (no model output: no call of
        # the model's names them) and a history it lengthens with torch.cat:
        # the allocator's stacks name the loop's own lines. The allocator's
        # recording is off again after the last walk; a process recording
        # its own history keeps it on, and lends its stacks.
        body = """
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 1000)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
if THEIRS:
    torch.cuda.memory._record_memory_history(max_entries=100000)
preds, hist = [], torch.zeros(0, 100, device="cuda")
with memdiag.record(model, opt, output=OUT, census=False):
    for step in range(8):
        x = torch.randn(512, 256, device="cuda")
        logits = model(x)
        loss = logits.logsumexp(-1).mean()
        loss.backward()
        preds.append(logits.detach().softmax(-1))  # ALLOC-PREDS
        hist = torch.cat([hist, logits.detach()[:64, :100]])  # ALLOC-HIST
        opt.step()
        opt.zero_grad(set_to_none=True)
    after = torch._C._cuda_isHistoryEnabled()
print("HISTORY-AFTER", after, torch._C._cuda_isHistoryEnabled())
"""
        for theirs in (False, True):
            script = self.path(f"keeps-{int(theirs)}.py")
            out = self.path(f"keeps-{int(theirs)}.json")
            with open(script, "w") as f:
                f.write(_SCRIPT_HEADER + f"OUT = {out!r}\nTHEIRS = {theirs}\n" + body)
            lines = {tag: i + 1 for i, text in enumerate(open(script).read().splitlines())
                     for tag in ("ALLOC-PREDS", "ALLOC-HIST") if tag in text}
            p = self.run_cmd([sys.executable, script], ok=False)
            self.assertEqual(p.returncode, 0, p.stderr[-3000:])
            self.assertIn(f"HISTORY-AFTER {theirs} {theirs}", p.stdout)
            r = self.load(os.path.basename(out))
            [event] = [e for e in r["events"] if e["kind"] == "kept"]
            kept = [k for k in event["kept"] if k["what"] == "tensor"]
            at = {k.get("allocated_at") for k in kept}
            name = os.path.basename(script)
            self.assertIn(f"{name}:{lines['ALLOC-PREDS']}", {a and os.path.basename(a) for a in at}, kept)
            grown = [k for k in kept if k.get("grows")]
            self.assertEqual(len(grown), 1, kept)
            self.assertEqual(os.path.basename(grown[0].get("allocated_at") or ""), f"{name}:{lines['ALLOC-HIST']}")
            self.assertIn("the allocator's stacks of live blocks read in", event["message"])
            v = self.verdict(os.path.basename(out))
            self.assertTrue(any(f"allocated at " in e and str(lines["ALLOC-PREDS"]) in e for e in v["evidence"]),
                            v["evidence"])

    def test_pinned_host_memory_the_loop_makes_is_in_the_report(self):
        # 64 MiB pinned at step 1 (a power of two: the host allocator rounds
        # up to one) and held: the pinned bytes at step 1's end are up by
        # exactly that on step 0's, and the resident set by at least it.
        body = """
model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(64, 512, device="cuda"); y = torch.randint(0, 10, (64,), device="cuda")
held = []
with memdiag.record(model, opt, output=OUT):
    for step in range(3):
        if step == 1:
            held.append(torch.ones(16 << 20).pin_memory())
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
"""
        p = self.python(f"OUT = {self.path('pinned.json')!r}\n" + body)
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        s = {(x["phase"], x["step"]): x for x in self.load("pinned.json")["samples"]}
        self.assertEqual(s[("cleanup", 1)]["host_pinned_mib"] - s[("cleanup", 0)]["host_pinned_mib"], 64.0)
        self.assertGreater(s[("cleanup", 1)]["host_resident_mib"] - s[("cleanup", 0)]["host_resident_mib"], 60.0)
        self.assertTrue(all("host_resident_mib" in x for k, x in s.items() if k[1] is None or k[1] < 2))

    def test_an_out_of_memory_error_dumps_the_allocator_history_for_memory_viz(self):
        snap = self.path("oom-snapshot.pickle")
        out = self.path("oom-snapshot.json")
        body = f"""
memdiag.limit_memory(700)
model = torch.nn.Sequential(torch.nn.Linear(4096, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 10)).cuda()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with memdiag.record(model, opt, output={out!r}, snapshot={snap!r}):
    for batch in (256, 1 << 17):
        x = torch.randn(batch, 4096, device="cuda")
        F.cross_entropy(model(x), torch.zeros(batch, dtype=torch.long, device="cuda")).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
"""
        p = self.python(body)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("OutOfMemoryError", p.stderr)
        r = self.load("oom-snapshot.json")
        self.assertEqual(r["status"], "oom")
        with open(snap, "rb") as f:
            import pickle
            s = pickle.load(f)
        self.assertTrue(s["segments"], "the snapshot has no segments")
        traces = [t for dev in s["device_traces"] for t in dev]
        self.assertTrue(any(t["action"] == "oom" for t in traces), "the history does not end in the failure")
        self.assertTrue(any(t["action"] == "alloc" for t in traces))


class LibraryModels(Cuda):
    def example(self, model, out, *extra, ok=True):
        return self.run_cmd([sys.executable, os.path.join(ROOT, "python", "examples", "library_model.py"), model,
                             "-o", self.path(out), *extra], ok=ok)

    def check_model(self, model, batch, limit, *extra):
        self.example(model, f"{model}.json", "--batch-size", str(batch), *extra)
        r = self.load(f"{model}.json")
        self.assertEqual(r["status"], "complete")
        v = self.verdict(f"{model}.json")
        self.note("library.txt", f"{model} batch {batch}: {v['dominant_cause']}; peak "
                                 f"{max(s['peak_allocated_mib'] for s in r['samples']):.1f} MiB; "
                                 f"parameters {r['model']['parameter_bytes'] / MIB:.1f} MiB; "
                                 + "; ".join(e if isinstance(e, str) else json.dumps(e) for e in v["evidence"][:2]))
        self.assertNotEqual(v["dominant_cause"], "inconclusive")
        p = self.example(model, f"{model}-oom.json", "--batch-size", str(batch), "--memory-limit-mib", str(limit),
                         *extra, ok=False)
        self.assertNotEqual(p.returncode, 0)
        oom = self.load(f"{model}-oom.json")
        self.assertEqual(oom["status"], "oom")
        ev = [e for e in oom["events"] if e["kind"] == "oom"][0]
        vo = self.verdict(f"{model}-oom.json")
        self.assertEqual(vo["decision"]["rule"], "out_of_memory")
        phase_cause = {"forward": "activations", "backward": "activations", "step": "optimizer_state"}
        if ev["phase"] in phase_cause:
            self.assertEqual(vo["dominant_cause"], phase_cause[ev["phase"]])
        self.note("library.txt", f"{model} batch {batch} under {limit} MiB: oom in {ev['phase']} step {ev['step']} "
                                 f"(request {ev['oom']['request_mib']:.2f} MiB, reserved {ev['oom']['reserved_mib']:.1f})"
                                 f": {vo['dominant_cause']}")

    def test_resnet50(self):
        try:
            import torchvision  # noqa: F401
        except ImportError as e:
            self.skipTest(f"torchvision not importable: {e}")
        self.check_model("resnet50", 64, 4000)

    def test_gpt2(self):
        try:
            import transformers  # noqa: F401
        except ImportError as e:
            self.skipTest(f"transformers not importable: {e}")
        self.check_model("gpt2", 8, 6000, "--sequence-length", "1024")


# A job recorded by test_the_steady_lane_reads_what_the_python_reads: an
# MLP with keyword token inputs whose batch varies, 40 steps, every step
# recorded at the defaults; prints how often the lane took the state.
_LANE_JOB = r"""
import sys
import torch
import torch.nn.functional as F
import memdiag
from memdiag import _lane

taken = [0]
original = _lane.maybe_engage


def counting(rec):
    original(rec)
    taken[0] += rec._lane_on


_lane.maybe_engage = counting


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(1000, 256)
        self.body = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 10))

    def forward(self, input_ids=None, attention_mask=None):
        return self.body(self.emb(input_ids).mean(1))


torch.manual_seed(0)
model = Model().cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
g = torch.Generator().manual_seed(1)
with memdiag.record(model, opt, output=sys.argv[1], every=1):
    for step in range(40):
        n = 16 + 8 * (step % 4)
        ids = torch.randint(0, 1000, (n, 32 + step % 3), generator=g).cuda()
        y = torch.randint(0, 10, (n,), generator=g).cuda()
        F.cross_entropy(model(input_ids=ids, attention_mask=None), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
print(taken[0])
"""

if __name__ == "__main__":
    unittest.main()
