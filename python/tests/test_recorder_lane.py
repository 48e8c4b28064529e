"""The recorder's steady lane (memdiag/_lane.py, native/steady_lane.cpp)
against the recorder's Python, on a machine without a device.

The native module is built with MEMDIAG_NATIVE_TEST=1: its readings come
from a counter instead of CUDA's allocator (each reading the next numbers),
and the recorder is given a probe that reads through it as on CUDA. Every
loop runs twice from the same counter, with the lane and without it
(MEMDIAG_NATIVE_LANE=0), and the two reports must hold the same samples:
every phase, step, figure, input size, loss and census count, in the same
order; only the clock's figures may differ. A lane that read once more or
once less, at another phase, or kept a sample the Python would not (or
missed one) fails here. Each test also asserts that the lane took the
steady steps, so that the comparison is not of the Python with itself.
"""
import json
import os
import re
import sys
import tempfile
import unittest

os.environ["MEMDIAG_NATIVE_TEST"] = "1"

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import memdiag  # noqa: E402
from memdiag import _census, _lane, _native, _probe, _recorder  # noqa: E402
from made_up_cuda import NATIVE as _NATIVE, FakeCudaProbe  # noqa: E402

def mlp(width=32, out=8):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.GELU(), torch.nn.Linear(width, out))


class KeywordModel(torch.nn.Module):
    """Called as model(x, ids=ids): the token ids by keyword."""

    def __init__(self):
        super().__init__()
        self.body = mlp()
        self.emb = torch.nn.Embedding(50, 32)

    def forward(self, x, ids=None):
        return self.body(x + self.emb(ids).mean(1))


class Seq2SeqModel(torch.nn.Module):
    """Called as model(x, ids=..., labels=...): a source and a target of
    their own lengths, an encoder-decoder's tokens."""

    def __init__(self):
        super().__init__()
        self.body = mlp()
        self.emb = torch.nn.Embedding(50, 32)

    def forward(self, x, ids=None, mask=None, labels=None):
        return self.body(x + self.emb(ids).mean(1) + self.emb(labels).mean(1))


class BagModel(torch.nn.Module):
    """Called as model(ids, offsets): EmbeddingBag's flat ids and bags."""

    def __init__(self):
        super().__init__()
        self.body = mlp()  # seeds the generator: the bags' weights are the same in both recordings
        self.bag = torch.nn.EmbeddingBag(50, 32)

    def forward(self, ids, offsets):
        return self.body(self.bag(ids, offsets))


class DictModel(torch.nn.Module):
    """Called with a dict: the recorder's Python walks it."""

    def __init__(self):
        super().__init__()
        self.body = mlp()

    def forward(self, batch):
        return self.body(batch["x"])


def plain(steps, batch=8, zero_grad=lambda opt: opt.zero_grad()):
    """The common loop: forward, backward, step(), zero_grad()."""
    def loop(model, opt, rec):
        for _ in range(steps):
            x, y = torch.randn(batch, 32), torch.randint(0, 8, (batch,))
            F.cross_entropy(model(x), y).backward()
            opt.step()
            zero_grad(opt)
    return loop


class LaneCase(unittest.TestCase):
    """The two recordings and their comparison."""

    def setUp(self):
        if _NATIVE is None:
            self.skipTest("the native module could not be built here: " + str(_native.why()) if
                          not torch.cuda.is_available() else "a device is here: the lane is tested on it for real")
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self._saved = _probe.CudaProbe, _lane.maybe_engage, _census._cuda_flag
        _recorder._oom_observer_attached.add(0)
        # The census counts this machine's tensors as the device's (the
        # made-up gradient count does too): every role's count is compared.
        _census._cuda_flag = lambda device_type: None
        self.addCleanup(self._restore)
        _probe.CudaProbe = FakeCudaProbe

    def _restore(self):
        _probe.CudaProbe, _lane.maybe_engage, _census._cuda_flag = self._saved
        os.environ.pop("MEMDIAG_NATIVE_LANE", None)

    def record(self, loop, lane, name, make=mlp, make_opt=None, **options):
        """The report of `loop(rec)` recorded with the lane or without it,
        from a fresh counter; and how many times the lane took the state."""
        os.environ["MEMDIAG_NATIVE_LANE"] = "1" if lane else "0"
        _NATIVE._test_fake_readings(True)
        engaged = [0]
        original = self._saved[1]

        def counting(rec):
            original(rec)
            engaged[0] += rec._lane_on

        _lane.maybe_engage = counting
        model = make()
        opt = make_opt(model) if make_opt else torch.optim.AdamW(model.parameters(), lr=1e-3)
        path = os.path.join(self.dir.name, name)
        torch.manual_seed(1)
        options.setdefault("warmup", False)
        with memdiag.record(model, opt, output=path, device="cuda", **options) as rec:
            loop(model, opt, rec)
        with open(path) as f:
            report = json.load(f)
        # What the recorder counted beside its samples: the steps whose
        # hooks it timed, the steps it did not record, where its state is.
        report["_counts"] = (rec._timed_later, rec._skipped_steps, rec._step, rec._in, rec._last, rec._micro)
        # The losses went through the native buffer's slots (made-up
        # readings keep a CPU loss there too), as a CUDA loss does.
        kept = rec._loss_buffer._kept
        report["_native_losses"] = bool(kept) and all(type(k) is int for k in kept)
        return report, engaged[0]

    def same(self, loop, engagements=1, make=mlp, make_opt=None, **options):
        """The lane's report and the Python's hold the same samples."""
        with_lane, taken = self.record(loop, True, "lane.json", make, make_opt, **options)
        without, none = self.record(loop, False, "python.json", make, make_opt, **options)
        self.assertEqual(none, 0)
        self.assertGreaterEqual(taken, engagements, "the lane never took the steady steps")

        def comparable(report):
            out = []
            for s in report["samples"]:
                s = dict(s)
                s.pop("elapsed_ms", None)  # the clock's
                out.append(s)
            return out
        a, b = comparable(with_lane), comparable(without)
        self.assertEqual(len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            self.assertEqual(x, y, f"sample {i}")
        self.assertEqual(with_lane["_counts"], without["_counts"])
        self.assertTrue(with_lane["_native_losses"])

        def events(report):  # the recorder's host time and the walks' times are the clock's
            return [dict(e, message=re.sub(r"[0-9.]+ (ms|us)\b", "(time)", e["message"])) for e in report["events"]
                    if not e["message"].startswith("recorder host time")]
        self.assertEqual(events(with_lane), events(without))
        return with_lane


class Lane(LaneCase):
    # ----- loops ------------------------------------------------------------

    def test_a_plain_loop_every_step_with_the_census(self):
        report = self.same(plain(40, 16, lambda opt: opt.zero_grad(set_to_none=True)), every=1)
        self.assertEqual(sum(s["phase"] == "forward" for s in report["samples"]), 40)
        self.assertEqual({s.get("samples") for s in report["samples"] if s["phase"] == "forward"}, {16})

    def test_zero_grad_first(self):
        def loop(model, opt, rec):
            for _ in range(35):
                opt.zero_grad()
                x, y = torch.randn(8, 32), torch.randint(0, 8, (8,))
                F.cross_entropy(model(x), y).backward()
                opt.step()
        self.same(loop, every=1)
        self.same(loop, every=1, census=False)

    def test_zero_grad_between_forward_and_backward_and_twice(self):
        def tutorial(model, opt, rec):
            for step in range(30):
                x, y = torch.randn(8, 32), torch.randint(0, 8, (8,))
                loss = F.cross_entropy(model(x), y)
                opt.zero_grad()  # as PyTorch's tutorials place it
                loss.backward()
                opt.step()

        def twice(model, opt, rec):
            for step in range(30):
                x, y = torch.randn(8, 32), torch.randint(0, 8, (8,))
                F.cross_entropy(model(x), y).backward()
                opt.step()
                if step % 3 == 0:
                    model.zero_grad(set_to_none=False)  # ends the cleanup, the gradients kept
                    opt.zero_grad()  # a second one between steps frees them: the forward recounts
                else:
                    opt.zero_grad()
        def always_twice(model, opt, rec):
            # The model's zero_grad() then the optimizer's, every step (a
            # master copy's loop): the lane may engage between the two, the
            # cleanup sample then the recorder's to read again.
            for step in range(30):
                x, y = torch.randn(8, 32), torch.randint(0, 8, (8,))
                F.cross_entropy(model(x), y).backward()
                opt.step()
                model.zero_grad(set_to_none=False)
                opt.zero_grad()
        self.same(tutorial, every=1)
        self.same(twice, every=1)
        self.same(always_twice, every=1)
        self.same(always_twice, every=1, census=False)

    def test_steps_not_recorded_between_recorded_ones(self):
        def unfreezing_at(k):
            # The last layer trains from step k on: the optimizer's state
            # grows there, in a step that may not be recorded.
            def loop(model, opt, rec):
                model[2].weight.requires_grad_(False)
                for step in range(230 if k > 100 else 60):
                    if step == k:
                        model[2].weight.requires_grad_(True)
                    x, y = torch.randn(4, 32), torch.randint(0, 8, (4,))
                    F.cross_entropy(model(x), y).backward()
                    opt.step()
                    opt.zero_grad()
            return loop
        report = self.same(unfreezing_at(150))  # every=None: all below 100, then one in 100
        self.assertIn(200, {s["step"] for s in report["samples"]})
        states = {s["tensors"]["optimizer_state_mib"] for s in report["samples"] if s["step"] is not None}
        self.assertEqual(len(states), 3)  # none, all but the last layer's, all
        self.same(unfreezing_at(30), every=7)
        self.same(unfreezing_at(30), every=1)

    def test_keyword_token_inputs_and_sizes_that_vary(self):
        def loop(model, opt, rec):
            for step in range(30):
                n = 4 + step % 5
                ids = torch.randint(0, 50, (n, 6 + step % 3))
                out = model(torch.randn(n, 32), ids=ids)
                F.cross_entropy(out, torch.randint(0, 8, (n,))).backward()
                opt.step()
                opt.zero_grad()
        report = self.same(loop, make=KeywordModel, every=1)
        forwards = [s for s in report["samples"] if s["phase"] == "forward"]
        self.assertEqual((forwards[-1]["samples"], forwards[-1]["tokens"]), (4 + 29 % 5, (4 + 29 % 5) * (6 + 29 % 3)))

    def test_a_source_and_target_of_their_own_lengths_are_both_tokens(self):
        def loop(model, opt, rec):
            for step in range(30):
                n, src, tgt = 4 + step % 3, 6 + step % 4, 3 + step % 5
                ids = torch.randint(0, 50, (n, src))
                out = model(torch.randn(n, 32), ids=ids, mask=torch.ones_like(ids),
                            labels=torch.randint(0, 50, (n, tgt)))
                F.cross_entropy(out, torch.randint(0, 8, (n,))).backward()
                opt.step()
                opt.zero_grad()
        report = self.same(loop, make=Seq2SeqModel, every=1)
        forwards = [s for s in report["samples"] if s["phase"] == "forward"]
        # Step 29: 6 samples, source 7, target 7: equal lengths read as one.
        self.assertEqual((forwards[-1]["samples"], forwards[-1]["tokens"]), (6, 6 * 7))
        self.assertEqual((forwards[-3]["samples"], forwards[-3]["tokens"]), (4, 4 * (9 + 5)))  # step 27

    def test_bags_of_flat_ids_are_the_samples(self):
        def loop(model, opt, rec):
            for step in range(30):
                bags = 4 + step % 3
                ids = torch.randint(0, 50, (bags * 5,))
                out = model(ids, torch.arange(0, bags * 5, 5))
                F.cross_entropy(out, torch.randint(0, 8, (bags,))).backward()
                opt.step()
                opt.zero_grad()
        report = self.same(loop, make=BagModel, every=1)
        forwards = [s for s in report["samples"] if s["phase"] == "forward"]
        self.assertEqual((forwards[-1]["samples"], forwards[-1]["tokens"]), (6, 30))

    def test_a_dict_batch_is_walked_by_the_python(self):
        def loop(model, opt, rec):
            for step in range(25):
                n = 6 + step % 4
                out = model({"x": torch.randn(n, 32)})
                F.cross_entropy(out, torch.randint(0, 8, (n,))).backward()
                opt.step()
                opt.zero_grad()
        report = self.same(loop, make=DictModel, every=1)
        self.assertEqual([s["samples"] for s in report["samples"] if s["phase"] == "forward"][-1], 6 + 24 % 4)

    def test_what_the_lane_hands_back_evaluation_skips_micro_batches_and_retain_graph(self):
        def loop(model, opt, rec):
            for step in range(60):
                x, y = torch.randn(8, 32), torch.randint(0, 8, (8,))
                if step % 9 == 4:
                    with torch.no_grad():  # an evaluation between steps
                        model(x)
                if step % 11 == 5:  # two micro-batches
                    for xs, ys in zip(x.chunk(2), y.chunk(2)):
                        (F.cross_entropy(model(xs), ys) / 2).backward()
                elif step == 23:
                    F.cross_entropy(model(x), y).backward(retain_graph=True)
                else:
                    F.cross_entropy(model(x), y).backward()
                if step % 13 == 7:
                    opt.zero_grad()  # the update skipped
                    continue
                opt.step()
                opt.zero_grad()
        self.same(loop, engagements=3, every=1)

    def test_evaluations_between_steady_steps_are_said_by_the_next_sample(self):
        # A validation pass under no_grad at another batch: after the
        # zero_grad() that ends a steady step (the next forward says it),
        # after step() before zero_grad() (the cleanup says it), and
        # between backward and step() (the step says it). The lane hands
        # the state back at the evaluation's forward and takes it again at
        # a later step's end; the samples are the Python's.
        def loop(model, opt, rec):
            for step in range(60):
                x, y = torch.randn(8, 32), torch.randint(0, 8, (8,))
                F.cross_entropy(model(x), y).backward()
                if step % 10 == 7:
                    with torch.no_grad():
                        model(torch.randn(64, 32))
                opt.step()
                if step % 10 == 5:
                    with torch.inference_mode():
                        model(torch.randn(48, 32))
                opt.zero_grad()
                if step % 10 == 3:
                    model.eval()
                    with torch.no_grad():
                        model(torch.randn(32, 32))
                        model(torch.randn(96, 32))
                    model.train()
        report = self.same(loop, engagements=4, every=1)
        said = {(s["phase"], s["step"]): s["evaluation"] for s in report["samples"] if "evaluation" in s}
        want = {}
        for k in range(0, 60, 10):
            want[("forward", k + 4)] = (2, 96)
            want[("cleanup", k + 5)] = (1, 48)
            want[("step", k + 7)] = (1, 64)
        self.assertEqual({k: (e["forwards"], e["samples"]) for k, e in said.items()}, want)
        for e in said.values():
            self.assertGreaterEqual(e["peak_mib"], e["start_mib"])
            self.assertIsNone(e["tokens"])

    def test_two_losses_of_one_forward(self):
        # l1.backward(retain_graph=True); l2.backward(): the lane ends the
        # first, the recorder's Python the second as the same micro-batch's
        # backward (its sample ended again), every step.
        def loop(model, opt, rec):
            for step in range(30):
                x, y = torch.randn(8, 32), torch.randint(0, 8, (8,))
                out = model(x)
                if step % 3 == 1:
                    F.cross_entropy(out, y).backward(retain_graph=True)
                    out.square().mean().backward()
                elif step % 3 == 2:  # three: the phase ended a third time
                    F.cross_entropy(out, y).backward(retain_graph=True)
                    out.abs().mean().backward(None, True)  # retain_graph given by position, as Tensor.backward passes it
                    out.square().mean().backward()
                else:
                    F.cross_entropy(out, y).backward()
                opt.step()
                opt.zero_grad()
        report = self.same(loop, engagements=2, every=1)
        phases = [s["phase"] for s in report["samples"] if s.get("step") is not None]
        self.assertEqual(phases, ["forward", "backward", "step", "cleanup"] * 30)

    def test_a_forward_that_raises_and_the_step_read_mid_run(self):
        def loop(model, opt, rec):
            for step in range(30):
                x, y = torch.randn(8, 32), torch.randint(0, 8, (8,))
                if step == 17:
                    try:
                        model(torch.randn(8, 5))  # the wrong width: the forward raises
                    except RuntimeError:
                        pass
                if step == 20:
                    assert rec.step == 19  # the recorder's state, read mid-run
                F.cross_entropy(model(x), y).backward()
                opt.step()
                opt.zero_grad()
        self.same(loop, engagements=2, every=1)

    def test_a_param_group_added_in_steady_steps_is_counted_as_parameters(self):
        # A new parameter and its group every step once the lane runs: its
        # census counts the new weights as the recorder's Python does.
        def loop(model, opt, rec):
            extra = []
            for step in range(40):
                x, y = torch.randn(8, 32), torch.randint(0, 8, (8,))
                loss = F.cross_entropy(model(x), y)
                if step >= 25:
                    p = torch.nn.Parameter(torch.zeros(64, 64))
                    extra.append(p)
                    opt.add_param_group({"params": [p]})
                    loss = loss + p.sum() * 0
                loss.backward()
                opt.step()
                opt.zero_grad()
        report = self.same(loop, every=1)
        params = [s["tensors"]["parameters_mib"] for s in report["samples"] if s["phase"] == "cleanup"]
        self.assertAlmostEqual(params[-1] - params[0], 15 * 64 * 64 * 4 / 2 ** 20, places=6)

    def test_a_closure_optimizer_evaluates_the_loss_inside_step(self):
        # LBFGS calls the closure (zero_grad, forward, backward) several
        # times inside step(): the lane hands those to the recorder's Python.
        def loop(model, opt, rec):
            for _ in range(25):
                x, y = torch.randn(8, 32), torch.randint(0, 8, (8,))

                def closure():
                    opt.zero_grad()
                    loss = F.cross_entropy(model(x), y)
                    loss.backward()
                    return loss
                loss = closure()
                opt.step(closure)
                opt.zero_grad()
        self.same(loop, make_opt=lambda m: torch.optim.LBFGS(m.parameters(), lr=0.1, max_iter=3), every=1)

    def test_a_gradient_scaler_that_skips_steps(self):
        # The scaler's step() that skips the optimizer's (inf gradients) is
        # the recorder's Python's to note; one that steps is the lane's.
        def loop(model, opt, rec):
            scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 4)
            for step in range(30):
                x, y = torch.randn(8, 32), torch.randint(0, 8, (8,))
                loss = F.cross_entropy(model(x), y)
                if step in (15, 22):
                    loss = loss * float("inf")
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
                opt.zero_grad()
        report = self.same(loop, engagements=3, every=1)
        notes = [e["message"] for e in report["events"] if "skipped by the gradient scaler" in e["message"]]
        self.assertEqual(len(notes), 2, notes)

    def test_an_optimizer_made_anew_while_the_lane_holds_the_state(self):
        # The loop makes its AdamW anew at steps 15 and 25, in steady steps:
        # the lane hands the state back at the new one's first step(), the
        # recorder follows it, and the one made at 15 is let go once the
        # one made at 25 steps (the lane kept the state holders it was
        # handed past its hand-back).
        import gc
        import weakref
        seen = []

        def loop(model, opt, rec):
            second = None
            for step in range(35):
                if step in (15, 25):
                    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
                    second = second or weakref.ref(opt)
                    # Before the new one makes its state (its hooks run
                    # after the recorder's global one): the old one is gone.
                    def check(o, args, kwargs, step=step):
                        if not o.state:  # its first step()
                            gc.collect()
                            seen.append((step, engaged, second() is not None))
                    opt.register_step_pre_hook(check)
                x, y = torch.randn(8, 32), torch.randint(0, 8, (8,))
                F.cross_entropy(model(x), y).backward()
                engaged = rec._lane_on
                opt.step()
                opt.zero_grad()
        report = self.same(loop, engagements=2, every=1)
        # The lane's run, then the Python's.
        self.assertEqual(seen, [(15, True, True), (25, True, False), (15, False, True), (25, False, False)])
        replaced = [e for e in report["events"] if "optimizer was replaced" in e["message"]]
        self.assertEqual([e["message"].split(" (")[0] for e in replaced],
                         ["the optimizer was replaced at step 15", "the optimizer was replaced at step 25"])
        self.assertEqual([s["phase"] for s in report["samples"] if s["step"] is not None],
                         ["forward", "backward", "step", "cleanup"] * 35)

    def test_a_weight_replaced_while_the_lane_holds_the_state(self):
        # resize_token_embeddings in a steady step: the embedding's weight
        # replaced in its group, its state popped and the new one's made.
        # No count of the state changes; which parameters hold it does, and
        # the lane's census counts the new weight as the Python's does.
        def make():
            torch.manual_seed(0)
            return torch.nn.Sequential(torch.nn.Embedding(100, 32), torch.nn.Flatten(), torch.nn.Linear(128, 8))

        def loop(model, opt, rec):
            for step in range(35):
                if step == 20:
                    old = model[0].weight
                    model[0] = torch.nn.Embedding(400, 32)
                    for g in opt.param_groups:
                        g["params"] = [model[0].weight if p is old else p for p in g["params"]]
                    opt.state.pop(old, None)
                    del old
                F.cross_entropy(model(torch.randint(0, 100, (8, 4))), torch.randint(0, 8, (8,))).backward()
                opt.step()
                opt.zero_grad()
        report = self.same(loop, make=make, every=1)
        mib = 1024 * 1024
        cleanups = {s["step"]: s["tensors"]["parameters_mib"] for s in report["samples"]
                    if s["phase"] == "cleanup" and s.get("tensors")}
        self.assertAlmostEqual(cleanups[19], (100 * 32 + 128 * 8 + 8) * 4 / mib, places=6)
        self.assertAlmostEqual(cleanups[34], (400 * 32 + 128 * 8 + 8) * 4 / mib, places=6)

    def test_the_step_read_from_another_thread_mid_hook_changes_nothing(self):
        # A progress thread reads rec.step while the lane is inside a hook
        # (here: inside its NVML reading, which calls back into Python):
        # the lane's step is read, its state is not taken back mid-hook.
        import threading
        seen = []
        original = FakeCudaProbe._process_mib

        def reading(probe):
            rec = _recorder._active[0]
            t = threading.Thread(target=lambda: seen.append(rec.step))
            t.start()
            t.join()
            return original(probe)
        FakeCudaProbe._process_mib = reading
        self.addCleanup(setattr, FakeCudaProbe, "_process_mib", original)

        self.same(plain(30), every=1)
        self.assertGreater(max(seen), 10)

    def test_the_model_and_the_recorder_are_freed_after_recording(self):
        # The lane holds the recorder's hooks (which hold the recorder): a
        # cycle through an object the collector cannot see, broken when
        # recording ends, or the model's memory would outlive the loop.
        import gc
        import weakref
        os.environ["MEMDIAG_NATIVE_LANE"] = "1"
        model = mlp()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        with memdiag.record(model, opt, output=os.path.join(self.dir.name, "r.json"), device="cuda",
                            warmup=False, every=1) as rec:
            for _ in range(15):
                F.cross_entropy(model(torch.randn(4, 32)), torch.randint(0, 8, (4,))).backward()
                opt.step()
                opt.zero_grad()
            self.assertTrue(rec._lane_on)
        refs = [weakref.ref(model), weakref.ref(rec)]
        del model, opt, rec
        gc.collect()
        self.assertEqual([r() for r in refs], [None, None])

    def test_the_report_ends_mid_step(self):
        def loop(model, opt, rec):
            for step in range(22):
                x, y = torch.randn(8, 32), torch.randint(0, 8, (8,))
                F.cross_entropy(model(x), y).backward()
                if step == 21:
                    return  # the recording ends after a backward
                opt.step()
                opt.zero_grad()
        self.same(loop, every=1)


class LibraryJobs(LaneCase):
    """Library models nobody here wrote, built from configurations with
    random weights, with and without the lane. Written before running them:
    the lane's samples are the Python's at every step count and batch
    tried (12 steps: the lane takes two steps; 25: fifteen), ResNet's
    forward samples are its batch with no tokens, BERT's (called with
    keywords, as Hugging Face models are) its batch and batch x length
    tokens, and the kept and by-module events (made before the lane takes
    over) are the same."""

    def test_torchvision_resnet18(self):
        try:
            import torchvision
        except ImportError:
            self.skipTest("torchvision is not installed")

        def make():
            torch.manual_seed(0)
            return torchvision.models.resnet18(weights=None, num_classes=10)

        for steps, batch in ((12, 2), (25, 4)):
            def loop(model, opt, rec, steps=steps, batch=batch):
                for _ in range(steps):
                    x, y = torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))
                    F.cross_entropy(model(x), y).backward()
                    opt.step()
                    opt.zero_grad()
            with self.subTest(steps=steps, batch=batch):
                report = self.same(loop, make=make, every=1)
                forwards = [s for s in report["samples"] if s["phase"] == "forward"]
                self.assertEqual({(s["samples"], s.get("tokens")) for s in forwards}, {(batch, None)})

    def test_transformers_bert_with_keyword_inputs(self):
        try:
            import transformers
        except ImportError:
            self.skipTest("transformers is not installed")

        def make():
            torch.manual_seed(0)
            config = transformers.BertConfig(vocab_size=500, hidden_size=64, num_hidden_layers=2,
                                             num_attention_heads=2, intermediate_size=128,
                                             max_position_embeddings=64)
            return transformers.BertForMaskedLM(config)

        for steps, batch, length in ((12, 2, 16), (25, 4, 24)):
            def loop(model, opt, rec, steps=steps, batch=batch, length=length):
                for _ in range(steps):
                    ids = torch.randint(0, 500, (batch, length))
                    model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids).loss.backward()
                    opt.step()
                    opt.zero_grad()
            with self.subTest(steps=steps, batch=batch):
                report = self.same(loop, make=make, every=1)
                forwards = [s for s in report["samples"] if s["phase"] == "forward"]
                self.assertEqual({(s["samples"], s.get("tokens")) for s in forwards}, {(batch, batch * length)})


if __name__ == "__main__":
    unittest.main()
