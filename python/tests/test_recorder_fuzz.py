"""The Python recorder fuzzed, as the C++ readers are (tests/fuzz): seeded
random options and loop shapes on the CPU, each recording read back by
compare_memory_reports --check, and its phases, status and failing place
checked against what the loop did.

A scenario draws: the recorder's options (census, every, kept, modules,
batch_size, variant, steps, seed), the loop's shape (steps, micro-batches,
zero_grad first or last, an evaluation forward under no_grad or in eval()
mode at the step's start, a step the loop skips, a checkpointed forward),
and its ending (complete, or an error raised in one step's forward or
backward: KeyboardInterrupt, an out-of-memory error, a ValueError).

    MEMDIAG_BIN=build/bin python3 python/tests/run.py test_recorder_fuzz
    MEMDIAG_RECORDER_FUZZ_SEED=7 MEMDIAG_RECORDER_FUZZ_RUNS=500 ...   # another draw, longer
"""
import json
import os
import random
import subprocess
import unittest

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint_sequential

from test_recorder import OOM_MESSAGE, Tmp, mlp, tool

import memdiag  # noqa: E402  (test_recorder put the checkout's copy first)

SEED = int(os.environ.get("MEMDIAG_RECORDER_FUZZ_SEED", "20261203"))
RUNS = int(os.environ.get("MEMDIAG_RECORDER_FUZZ_RUNS", "60"))
ENDINGS = {"complete": None, "interrupted": KeyboardInterrupt, "oom": torch.OutOfMemoryError, "failed": ValueError}


class Stop(torch.autograd.Function):
    """Raises `error` in backward."""

    @staticmethod
    def forward(ctx, x, error):
        ctx.error = error
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        raise ctx.error


def draw(rng):
    steps = rng.randint(1, 7)
    every = rng.choice([None, 1, 1, 2, 3])
    s = {
        "options": {"census": rng.random() < 0.7, "every": every, "kept": rng.random() < 0.5,
                    "modules": rng.random() < 0.5},
        "steps": steps,
        "micro": rng.choice([1, 1, 2, 3]),
        "zero_grad_first": rng.random() < 0.5,
        "eval": rng.choice([None, None, "no_grad", "eval_mode"]),
        "skip": rng.randrange(steps) if rng.random() < 0.2 else None,
        "checkpoint": rng.random() < 0.2,
        "batch": rng.choice([4, 8, 16]),
        "ending": rng.choice(["complete", "complete", "interrupted", "oom", "failed"]),
    }
    if rng.random() < 0.3:
        s["options"]["batch_size"] = rng.randint(1, 64)
    if rng.random() < 0.3:
        s["options"]["variant"] = rng.choice(["v", "bf16 autocast", "~" * 80, "a b-c_d.e"])
    if rng.random() < 0.2:
        s["options"]["steps"] = rng.randint(0, 10_000_000)
    if rng.random() < 0.2:
        s["options"]["seed"] = rng.choice([0, 1, 1 << 53])
    s["stop_at"] = (rng.randrange(steps), rng.randrange(s["micro"]), rng.choice(["forward", "backward"]))
    return s


def run(s, path):
    """The loop `s` describes, recorded to `path`; returns the exception
    that left the block, or None."""
    torch.manual_seed(0)
    model = mlp(width=32, depth=2)
    opt = torch.optim.AdamW(model.parameters())
    error = ENDINGS[s["ending"]]

    def stopping():
        return error(OOM_MESSAGE) if error is torch.OutOfMemoryError else error("stopped")
    try:
        with memdiag.record(model, opt, output=path, **s["options"]):
            for step in range(s["steps"]):
                if s["zero_grad_first"]:
                    opt.zero_grad()
                if s["eval"] == "no_grad":
                    with torch.no_grad():
                        model(torch.randn(2, 32))
                elif s["eval"] == "eval_mode":
                    model.eval()
                    model(torch.randn(2, 32))
                    model.train()
                for micro in range(s["micro"]):
                    here = error is not None and s["stop_at"][:2] == (step, micro)
                    x = torch.randn(s["batch"], 32)
                    if here and s["stop_at"][2] == "forward":
                        raise stopping()
                    out = checkpoint_sequential(model, 2, x, use_reentrant=False) if s["checkpoint"] else model(x)
                    if here:
                        out = Stop.apply(out, stopping())
                    (F.cross_entropy(out, torch.randint(0, 8, (s["batch"],))) / s["micro"]).backward()
                if step != s["skip"]:
                    opt.step()
                if not s["zero_grad_first"]:
                    opt.zero_grad()
    except (KeyboardInterrupt, Exception) as e:  # noqa: B902  the loop's own ending
        return e
    return None


class Fuzz(Tmp):
    def test_every_drawn_loop_leaves_a_report_the_reader_accepts_and_that_says_what_the_loop_did(self):
        compare = tool("compare_memory_reports")
        rng = random.Random(SEED)
        names = []
        for i in range(RUNS):
            s = draw(rng)
            name = f"fuzz-{i}.json"
            with self.subTest(i=i, scenario=s):
                raised = run(s, self.path(name))
                ending = s["ending"]
                if ending == "complete":
                    self.assertIsNone(raised)
                else:
                    self.assertIsInstance(raised, ENDINGS[ending])
                r = self.load(name)
                self.assertEqual(r["status"], ending)
                names.append(name)
                steps = [x["step"] for x in r["samples"] if x["step"] is not None]
                self.assertEqual(steps, sorted(steps))
                if ending == "complete":
                    ran = s["steps"]
                    recorded = {x["step"] for x in r["samples"] if x["phase"] == "cleanup"}
                    every = s["options"]["every"]
                    want = set(range(ran)) if every in (None, 1) else \
                        {k for k in range(ran) if k < 2 or k % every == 0}
                    self.assertEqual(recorded, want)
                    forwards = [x for x in r["samples"] if x["phase"] == "forward"]
                    self.assertEqual(len(forwards), len(want) * s["micro"])  # no eval forward counted
                    if "batch_size" in s["options"]:
                        self.assertEqual(r["config"]["batch_size_per_device"], s["options"]["batch_size"])
                    elif not s["checkpoint"]:
                        self.assertEqual(r["config"]["batch_size_per_device"], s["batch"] * s["micro"])
                        self.assertEqual({x["samples"] for x in forwards}, {s["batch"]})
                else:
                    kind = {"interrupted": "interrupted", "oom": "oom", "failed": "error"}[ending]
                    ev = [e for e in r["events"] if e["kind"] == kind]
                    self.assertEqual(len(ev), 1, r["events"])
                    step, _, phase = s["stop_at"]
                    self.assertEqual(ev[0]["step"], step)
                    # A forward's error is in the forward; one raised in
                    # backward's first node is in backward.
                    # Between step 0's micro-batches, before the next
                    # forward: the recorder cannot know more are coming
                    # (gradient clipping would be the step's).
                    unknowable = phase == "forward" and step == 0 and s["stop_at"][1] > 0
                    self.assertEqual(ev[0]["phase"], "step" if unknowable else phase)
                if "variant" in s["options"]:
                    self.assertEqual(r["config"]["variant"], s["options"]["variant"])
        # Every report read back by the reader, in one call.
        out = subprocess.run([compare, "--check", *[self.path(n) for n in names]], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stdout[-3000:] + out.stderr[-3000:])
        self.assertEqual(out.stdout.count(": valid"), len(names), out.stdout[-3000:])
        # And compared, every format.
        for fmt in ("text", "json", "markdown", "html"):
            out = subprocess.run([compare, "--format", fmt, *[self.path(n) for n in names[:12]]],
                                 capture_output=True, text=True)
            self.assertIn(out.returncode, (0, 1), f"{fmt}: {out.stderr[-2000:]}")
            if fmt == "json":
                json.loads(out.stdout)


if __name__ == "__main__":
    unittest.main()
