#!/usr/bin/env python3
"""What naming a kept tensor's allocating line costs on CUDA: the recorder
has the caching allocator keep each live block's Python stack from the
start of recording to the last kept walk (step 6), then reads one snapshot.
This times a corpus job's steps with that on and off (MEMDIAG_ALLOCATION_STACKS
=1 / =0), in shuffled rounds in one process, and prints the median time of
the steps the stacks are kept for (1 to 6) each way, the snapshot's read
time, and whether the kept tensors were named by their line.

    python3 scripts/recorder-stack-cost.py --job bert-kept-logits --rounds 5

Needs CUDA (the allocator's stacks are CUDA's); on the CPU it says so and
exits 2.
"""
import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python", "jobs"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import torch  # noqa: E402

import corpus  # noqa: E402
import memdiag  # noqa: E402


def one(job, size, steps, stacks, folder, tag):
    os.environ["MEMDIAG_ALLOCATION_STACKS"] = "1" if stacks else "0"
    family, build, _, _ = corpus.JOBS[job]
    s = dict(corpus.SIZES[family][size], steps=steps)
    torch.manual_seed(0)
    device = torch.device("cuda")
    model, opt, batch, forward = build(s, device)
    model.train()
    out = os.path.join(folder, f"{tag}.json")
    times, kept = [], []
    with memdiag.record(model, opt, output=out, name=job, steps=steps):
        for step in range(steps):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            loss, logits = forward(model, batch(step))
            kept.append(logits)  # what the job keeps "for metrics"
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
    with open(out) as f:
        report = json.load(f)
    events = [e for e in report["events"] if e["kind"] == "kept"]
    named = [k.get("allocated_at") for e in events for k in e["kept"] if k["what"] == "tensor"]
    message = events[0]["message"] if events else ""
    del model, opt, kept
    torch.cuda.empty_cache()
    return statistics.median(times[1:7]), named, message


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--job", default="bert-kept-logits", choices=sorted(corpus.JOBS))
    ap.add_argument("--size", default="gpu", choices=("cpu", "gpu"))
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("recorder-stack-cost.py: the allocator's stacks are CUDA's; no CUDA device here", file=sys.stderr)
        return 2
    folder = tempfile.mkdtemp()
    one(a.job, a.size, a.steps, True, folder, "warm")  # kernels loaded, libraries imported
    got = {False: [], True: []}
    last = {}
    rng = random.Random(0)
    for r in range(a.rounds):
        order = [False, True]
        rng.shuffle(order)
        for stacks in order:
            t, named, message = one(a.job, a.size, a.steps, stacks, folder, f"{r}-{int(stacks)}")
            got[stacks].append(t)
            last[stacks] = (named, message)
    print(f"# python3 scripts/recorder-stack-cost.py --job {a.job} --size {a.size} --steps {a.steps} "
          f"--rounds {a.rounds}   # {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for stacks in (False, True):
        v = got[stacks]
        print(f"stacks {'on ' if stacks else 'off'}: median step 1-6 {statistics.median(v) * 1e3:.2f} ms "
              f"(rounds: {', '.join(f'{x * 1e3:.2f}' for x in v)})")
    off, on = statistics.median(got[False]), statistics.median(got[True])
    print(f"cost while kept: {(on - off) * 1e3:+.2f} ms a step ({(on / off - 1) * 100:+.1f}%), steps 1 to 6 only")
    for stacks in (False, True):
        named, message = last[stacks]
        print(f"stacks {'on ' if stacks else 'off'}: kept tensors allocated_at {named}")
        print(f"  {message}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
