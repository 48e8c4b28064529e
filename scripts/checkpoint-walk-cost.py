#!/usr/bin/env python3
"""What finding activation checkpointing in the first backward's graph
costs the recorder, once a job (memdiag/_kept.py: checkpointed_graph):
GPT-2 (12 blocks of 768, from a config, random weights) at batch 2 x 256
with its blocks checkpointed (gradient_checkpointing_enable, non-reentrant)
and without. Prints each walk's answer (checkpointed, bytes saved before the
regions) and its time.

    python3 scripts/checkpoint-walk-cost.py   (with transformers: scripts/setup.sh tests)
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402
from memdiag import _kept  # noqa: E402

torch.manual_seed(0)
m = GPT2LMHeadModel(GPT2Config(n_layer=12, n_embd=768, n_head=12, vocab_size=50257, n_positions=256))
m.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
m.train()
ids = torch.randint(0, 50257, (2, 256))
for checkpointed in (True, False):
    if not checkpointed:
        m.gradient_checkpointing_disable()
    loss = m(input_ids=ids, labels=ids).loss
    owned = frozenset(k for k in map(_kept._storage_key, m.parameters()) if k)
    t = time.perf_counter()
    found, outside, _ = _kept.checkpointed_graph(loss.grad_fn, owned)
    ms = (time.perf_counter() - t) * 1000
    print(f"{'checkpointed' if checkpointed else 'plain':>12}: found {found}, saved before the regions "
          f"{'-' if outside is None else f'{outside / 2**20:.2f} MiB'}, {ms:.1f} ms")
    loss.backward()
