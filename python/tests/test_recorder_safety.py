"""The Python recorder inside a job that does not go to plan, on the CPU:
signals, a recorder used twice, start() without finish(), a model with no
storage, options the report's reader would refuse, figures beyond what a
report holds, forwards that are no step's, the loop's own profiler, and
the CPU probe's bounded windows. Each reproduced a class of the third
hostile pass (issue 41) before it was mended.

    MEMDIAG_BIN=build/bin python3 python/tests/run.py test_recorder_safety
"""
import json
import os
import signal
import subprocess
import sys
import textwrap
import unittest

import torch
import torch.nn.functional as F

from test_recorder import ROOT, Tmp, expected, mlp, phases, train

import memdiag  # noqa: E402  (test_recorder put the checkout's copy first)
from memdiag import _probe  # noqa: E402


class Signals(Tmp):
    """SIGTERM and SIGHUP as Ctrl-C is: a report, status interrupted, and
    the job's exit status still the signal's; the loop's own handler first."""

    def job(self, signame, handler=""):
        script = textwrap.dedent(f"""
            import os, signal, sys
            sys.path.insert(0, {os.path.join(ROOT, 'python')!r})
            import torch, memdiag
            torch.manual_seed(0)
            {handler}
            m = torch.nn.Linear(32, 4)
            o = torch.optim.SGD(m.parameters(), lr=0.1)
            with memdiag.record(m, o, output=sys.argv[1]):
                for step in range(4):
                    if step == 2:
                        os.kill(os.getpid(), signal.{signame})
                    m(torch.randn(8, 32)).square().mean().backward()
                    o.step()
                    o.zero_grad()
            print("the loop ended")
        """)
        out = self.path(f"{signame}.json")
        p = subprocess.run([sys.executable, "-c", script, out], capture_output=True, text=True, timeout=300)
        return p, out

    def test_the_default_action_still_ends_the_job_after_the_report(self):
        for signame in ("SIGTERM", "SIGHUP"):
            p, out = self.job(signame)
            number = getattr(signal, signame)
            self.assertEqual(p.returncode, -number, p.stderr)  # ended by the signal, as without memdiag
            self.assertNotIn("the loop ended", p.stdout)
            with open(out) as f:
                r = json.load(f)
            self.assertEqual(r["status"], "interrupted")
            ev = [e for e in r["events"] if e["kind"] == "interrupted"]
            self.assertEqual(len(ev), 1)
            self.assertIn(f"({signame})", ev[0]["message"])
            self.assertEqual(ev[0]["step"], 2)  # between steps 1 and 2: the next step's forward
            self.assertEqual(phases(r), expected(2))
            self.check(os.path.basename(out))

    def test_the_loops_own_handler_runs_first_and_decides(self):
        # It raises (a graceful shutdown): the block's exit writes the report.
        p, out = self.job("SIGTERM", "signal.signal(signal.SIGTERM, lambda s, f: sys.exit(3))")
        self.assertEqual(p.returncode, 3, p.stderr)
        with open(out) as f:
            r = json.load(f)
        self.assertEqual(r["status"], "interrupted")
        self.assertTrue(any("(SIGTERM)" in e["message"] for e in r["events"] if e["kind"] == "interrupted"))
        # It returns: the job goes on, and so does the recording.
        p, out = self.job("SIGTERM", "signal.signal(signal.SIGTERM, lambda s, f: print('mine'))")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("mine", p.stdout)
        self.assertIn("the loop ended", p.stdout)
        with open(out) as f:
            r = json.load(f)
        self.assertEqual(r["status"], "complete")
        self.assertEqual(phases(r), expected(4))

    def test_a_signal_while_the_report_is_written_waits_for_it(self):
        # torchrun stops the other ranks with SIGTERM the moment one fails;
        # a rank whose own loop just failed (its peer's connection closed)
        # is then writing its report. The signal waits for the write, then
        # meets the handler that was there before: the default action.
        script = textwrap.dedent(f"""
            import os, signal, sys
            sys.path.insert(0, {os.path.join(ROOT, 'python')!r})
            import torch, memdiag
            from memdiag import _recorder
            write = _recorder.Recorder._write
            def write_after_a_signal(self):
                os.kill(os.getpid(), signal.SIGTERM)
                write(self)
            _recorder.Recorder._write = write_after_a_signal
            m = torch.nn.Linear(32, 4)
            o = torch.optim.SGD(m.parameters(), lr=0.1)
            with memdiag.record(m, o, output=sys.argv[1]):
                m(torch.randn(8, 32)).sum().backward()
                o.step()
                o.zero_grad()
                raise RuntimeError("Connection closed by peer")
        """)
        out = self.path("held.json")
        p = subprocess.run([sys.executable, "-c", script, out], capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, -signal.SIGTERM, p.stderr)
        with open(out) as f:
            r = json.load(f)
        self.assertEqual(r["status"], "failed")  # what ended the loop; the signal came after
        self.check(os.path.basename(out))

    def test_the_handlers_are_put_back(self):
        before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with memdiag.record(model, opt, output=self.path("h.json")):
            self.assertIsNot(signal.getsignal(signal.SIGTERM), before[0])
            train(model, opt, 1)
        self.assertEqual((signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)), before)
        ignored = signal.signal(signal.SIGHUP, signal.SIG_IGN)
        try:
            with memdiag.record(model, opt, output=self.path("i.json")):
                self.assertIs(signal.getsignal(signal.SIGHUP), signal.SIG_IGN)  # ignored stays ignored
                train(model, opt, 1)
        finally:
            signal.signal(signal.SIGHUP, ignored)


class NothingBrokenBehind(Tmp):
    def test_a_recorder_used_twice_refuses_and_the_next_one_records(self):
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        rec = memdiag.Recorder(model, opt, output=self.path("first.json"))
        with rec:
            train(model, opt, 1)
        ran = []
        with self.assertRaisesRegex(RuntimeError, r"^memdiag: this Recorder already recorded a block \(to .*first"
                                    r"\.json\); make a new one"):
            with rec:
                ran.append(True)
        self.assertEqual(ran, [])
        self.assertEqual(len(model._forward_pre_hooks), 0)  # nothing left installed
        with memdiag.record(model, opt, output=self.path("second.json")):
            train(model, opt, 2)
        self.assertEqual(phases(self.load("second.json")), expected(2))
        self.check("first.json", "second.json")

    def test_every_hook_is_removed_after_an_exception_in_the_loop(self):
        from torch.nn.modules import module as torch_module
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        backward = torch.autograd.backward
        handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
        global_hooks = (len(torch_module._global_forward_pre_hooks), len(torch_module._global_forward_hooks))
        with self.assertRaisesRegex(ValueError, "^the loop's own error$"):
            with memdiag.record(model, opt, output=self.path("raised.json")):
                train(model, opt, 1)
                model(torch.randn(8, 64)).sum().backward()  # step 1's forward and backward, then the error
                raise ValueError("the loop's own error")
        self.assertEqual(self.load("raised.json")["status"], "failed")
        self.assertEqual((len(model._forward_pre_hooks), len(model._forward_hooks)), (0, 0))
        self.assertEqual((len(opt._optimizer_step_pre_hooks), len(opt._optimizer_step_post_hooks)), (0, 0))
        self.assertNotIn("zero_grad", vars(model))  # the wrappers gone: the classes' methods show through
        self.assertNotIn("zero_grad", vars(opt))
        self.assertIs(torch.autograd.backward, backward)
        self.assertEqual({s: signal.getsignal(s) for s in handlers}, handlers)
        self.assertEqual((len(torch_module._global_forward_pre_hooks), len(torch_module._global_forward_hooks)),
                         global_hooks)
        # The loop goes on without the recorder, and a new one records.
        train(model, opt, 1)
        with memdiag.record(model, opt, output=self.path("after.json")):
            train(model, opt, 2)
        self.assertEqual(phases(self.load("after.json")), expected(2))
        self.check("raised.json", "after.json")

    def test_start_without_finish_writes_a_failed_report_at_exit(self):
        script = textwrap.dedent(f"""
            import sys
            sys.path.insert(0, {os.path.join(ROOT, 'python')!r})
            import torch, memdiag
            m = torch.nn.Linear(32, 4)
            o = torch.optim.SGD(m.parameters(), lr=0.1)
            memdiag.Recorder(m, o, output=sys.argv[1]).start()
            m(torch.randn(8, 32)).sum().backward()
            o.step()
            raise RuntimeError("the job's own error")
        """)
        p = subprocess.run([sys.executable, "-c", script, self.path("open.json")], capture_output=True, text=True,
                           timeout=300)
        self.assertEqual(p.returncode, 1, p.stderr)  # the traceback's exit status, not a segfault's
        self.assertIn("the job's own error", p.stderr)
        r = self.load("open.json")
        self.assertEqual(r["status"], "failed")
        self.assertTrue(any("finish() was not called" in e["message"] for e in r["events"] if e["kind"] == "error"))
        self.check("open.json")

    def test_a_model_on_the_meta_device_is_refused_before_the_loop_runs(self):
        with torch.device("meta"):
            model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        ran = []
        with self.assertRaisesRegex(ValueError, r"^memdiag: parameter 0\.weight is on the meta device: .*to_empty"):
            with memdiag.record(model, opt, output=self.path("meta.json")):
                ran.append(True)
        self.assertEqual(ran, [])
        self.assertFalse(os.path.exists(self.path("meta.json")))
        self.assertEqual(len(model._forward_pre_hooks), 0)

    def test_eval_mode_forwards_are_no_steps_and_training_in_eval_mode_still_is(self):
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with memdiag.record(model, opt, output=self.path("eval.json")):
            for _ in range(3):
                opt.zero_grad()
                model.eval()
                model(torch.randn(4, 64))  # a validation pass that forgot no_grad
                with torch.no_grad():
                    model(torch.randn(4, 64))
                model.train()
                F.cross_entropy(model(torch.randn(16, 64)), torch.randint(0, 8, (16,))).backward()
                opt.step()
        r = self.load("eval.json")
        self.assertEqual(phases(r), expected(3))
        self.assertEqual([s["samples"] for s in r["samples"] if s["phase"] == "forward"], [16, 16, 16])
        # A loop that trains in eval mode (frozen batch norm): backward counts its forwards.
        model.eval()
        with memdiag.record(model, opt, output=self.path("frozen.json")):
            train(model, opt, 2)
        r = self.load("frozen.json")
        self.assertEqual(phases(r), expected(2))
        self.assertEqual([s["samples"] for s in r["samples"] if s["phase"] == "forward"], [16, 16])
        self.check("eval.json", "frozen.json")


class KeptWalks(Tmp):
    def test_a_leak_is_named_though_freed_tensors_left_it_their_ids(self):
        # A tensor kept every step, made where the step before freed others
        # (the last batch's): it often takes a freed one's id.
        import gc
        model = mlp()
        opt = torch.optim.AdamW(model.parameters())
        kept = []
        rec = memdiag.Recorder(model, opt, output=self.path("leaky.json"))
        with rec:
            train(model, opt, 8, on_step=lambda step: kept.append(torch.randn(64, 1024)))  # 0.25 MiB a step
            self.assertEqual(gc.get_freeze_count(), 0)  # unfrozen after the last walk (step 6)
        self.assertEqual(rec._kept.walks, len(memdiag._kept.WALKED_STEPS))  # steps 0 to 6
        records = [r for e in self.load("leaky.json")["events"] if e["kind"] == "kept" for r in e["kept"]]
        self.assertEqual([(r["shape"], r["per_step"]) for r in records if r["what"] == "tensor"], [([64, 1024], 1)])

    def test_the_processs_objects_are_frozen_out_of_the_walks_and_given_back(self):
        import gc
        model = mlp()
        opt = torch.optim.AdamW(model.parameters())
        before = gc.get_freeze_count()  # Python 3.12 on the H200 machine starts with some
        with memdiag.record(model, opt, output=self.path("short.json")):
            train(model, opt, 1)
            self.assertGreater(gc.get_freeze_count(), before + 1000)  # torch's own objects, at least
        self.assertEqual(gc.get_freeze_count(), 0)  # a job shorter than the walks: at its end
        # What the recording froze is collectable again: a model in a cycle, dropped, is freed.
        import weakref
        model = mlp()
        model.me = [model]  # a cycle
        opt = torch.optim.AdamW(model.parameters())
        with memdiag.record(model, opt, output=self.path("cycle.json")):
            train(model, opt, 6)
        gone = weakref.ref(model)
        del model, opt
        gc.collect()
        self.assertIsNone(gone())


class ValuesAReportHolds(Tmp):
    def test_options_the_reader_would_refuse_are_refused_at_construction(self):
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        bad = [("variant", "é", "printable ASCII"), ("variant", "", "1 to 80"), ("variant", "a\tb", "printable"),
               ("variant", "x" * 81, "1 to 80"), ("variant", 7, "printable"), ("steps", 10 ** 9, "0 to 10,000,000"),
               ("steps", -1, "0 to 10,000,000"), ("steps", 2.5, "whole number"), ("preset", "", "1 to 80"),
               ("name", "", "1 to 200"), ("name", "a\nb", "printable"), ("batch_size", -3, "1 to 2\\^30"),
               ("seed", -5, "0 to 2\\^53")]
        for key, value, why in bad:
            with self.assertRaisesRegex(ValueError, f"^memdiag: {key}=.*{why}", msg=f"{key}={value!r}"):
                memdiag.Recorder(model, opt, output=self.path("never.json"), **{key: value})
        self.assertFalse(os.path.exists(self.path("never.json")))
        # The longest and oddest that are allowed are read back.
        with memdiag.record(model, opt, output=self.path("edge.json"), variant="~" * 80, steps=10_000_000,
                            preset="p" * 80, name="A name: with ~ punctuation!"):
            train(model, opt, 1)
        self.check("edge.json")

    def test_a_loss_and_weights_beyond_what_a_report_holds_are_left_out_and_said(self):
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with memdiag.record(model, opt, output=self.path("huge.json")):
            x = torch.randn(8, 64)
            (model(x).sum() * 0 + 1e35).backward()  # a loss of 1e35: finite, beyond the reader's 1e30
            opt.step()
            opt.zero_grad()
            with torch.no_grad():
                for p in model.parameters():
                    p.fill_(1e18)  # weights that diverged without reaching inf
        r = self.load("huge.json")
        self.assertNotIn("loss", [k for s in r["samples"] for k in s])
        self.assertNotIn("final_parameter_sum", r["model"])
        self.assertNotIn("final_parameter_sum_of_squares", r["model"])
        note = [e["message"] for e in r["events"] if "beyond what a report holds" in e["message"]]
        self.assertEqual(len(note), 1, r["events"])
        self.assertIn("loss (1e+35)", note[0])
        self.check("huge.json")


class CpuProbe(Tmp):
    def record(self, name, steps, during=None, window=None):
        model = mlp()
        opt = torch.optim.AdamW(model.parameters())
        old = _probe.CpuProbe.WINDOW_EVENTS
        if window is not None:
            _probe.CpuProbe.WINDOW_EVENTS = window
        try:
            torch.manual_seed(1)
            with memdiag.record(model, opt, output=self.path(name), kept=False, modules=False):
                for step in range(steps):
                    if during is not None and step == 1:
                        with during():
                            train(model, opt, 2)
                    else:
                        train(model, opt, 1)
        finally:
            _probe.CpuProbe.WINDOW_EVENTS = old
        return self.load(name)

    @staticmethod
    def figures(r):
        return [(s["phase"], s["step"], round(s["allocated_mib"], 6), round(s["peak_allocated_mib"], 6))
                for s in r["samples"]]

    def assertClose(self, got, want, mib):
        self.assertEqual([g[:2] for g in got], [w[:2] for w in want])
        for g, w in zip(got, want):
            self.assertLessEqual(max(abs(g[2] - w[2]), abs(g[3] - w[3])), mib, (g, w))

    def test_a_memory_event_larger_than_the_host_is_left_out(self):
        # A CI run read a cleanup 21800752 MiB up once in a job of 48 MiB:
        # one event no allocation of this host can be, left out and said.
        class Event:
            def __init__(self, name, t, nbytes=0):
                self._name, self._t, self._nbytes = name, t, nbytes

            def name(self):
                return self._name

            def start_ns(self):
                return self._t

            def nbytes(self):
                return self._nbytes

        probe = _probe.CpuProbe(0)
        probe._marks = 2
        probe._fold([Event("[memory]", 1, 1 << 20), Event("[memory]", 2, 1 << 60), Event("memdiag.mark.0", 3),
                     Event("[memory]", 4, 1 << 20), Event("memdiag.mark.1", 5)])
        self.assertEqual(probe._readings, {0: (1 << 20, 1 << 20), 1: (2 << 20, 2 << 20)})
        self.assertEqual(len([n for n in probe.notes if "more than the host has" in n]), 1)

    def test_windows_of_any_size_read_the_same_as_one(self):
        one = self.figures(self.record("one.json", 12, window=10 ** 9))
        for window in (1, 300):  # a new window at every step; every few steps
            self.assertEqual(self.figures(self.record(f"w{window}.json", 12, window=window)), one, window)

    def test_the_loops_own_profiler_runs_beside_the_probe(self):
        alone = self.figures(self.record("alone.json", 4, during=None))
        # train(…, 2) inside the loop's profiler: steps 1 and 2.
        seen = []

        def theirs():
            p = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True)
            seen.append(p)
            return p
        r = self.record("beside.json", 3, during=theirs)
        self.assertEqual(r["status"], "complete")
        # Its memory events read into the probe's figures (to a kilobyte:
        # the loop's profiler makes a few bytes of its own).
        self.assertClose(self.figures(r), alone, 0.001)
        self.assertTrue(any(e.key == "aten::addmm" for e in seen[0].key_averages()))  # and it got its own
        # Without profile_memory its window is unmeasured, and said.
        r = self.record("blind.json", 3, during=lambda: torch.profiler.profile(activities=[
            torch.profiler.ProfilerActivity.CPU]))
        self.assertEqual(r["status"], "complete")
        self.assertTrue(any("without profile_memory" in e["message"] for e in r["events"]), r["events"])
        self.check("beside.json", "blind.json")


if __name__ == "__main__":
    unittest.main()
