"""Eight training jobs whose input size varies from step to step (independent test, session 67).

  python jobs.py --job NAME --steps N -o REPORT            record with memdiag.record
  python jobs.py --job NAME --info                         parameter count, schedule
  python jobs.py --job NAME --steps 3 --fixed b=8,l=256 --measure profiler|memtracker
        run at one fixed shape WITHOUT memdiag and print each step's peak by my own method:
        profiler: live tensor bytes at the step's start (gc walk, storages de-duplicated)
                  + max of the CPU allocator's running total reported to torch.profiler
                  (Allocation events' total_allocated) within the step;
        memtracker: torch.distributed._tools.mem_tracker.MemTracker's peak (tensor storages).
All models are built from configurations with random weights; nothing is downloaded.
"""
import argparse, gc, os, random, sys, time
import torch
import torch.nn.functional as F

MiB = 1024 * 1024


def parse_fixed(s):
    d = {}
    if s:
        for kv in s.split(","):
            k, v = kv.split("=")
            d[k] = int(v)
    return d


# ---------------------------------------------------------------- models
def hf():
    import transformers
    transformers.logging.set_verbosity_error()
    return transformers


def build(job):
    torch.manual_seed(0)
    if job == "llama_tokbudget":
        t = hf()
        cfg = t.LlamaConfig(vocab_size=8000, hidden_size=256, intermediate_size=704, num_hidden_layers=4,
                            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                            tie_word_embeddings=False)
        cfg._attn_implementation = "sdpa"
        return t.LlamaForCausalLM(cfg), "lm", 8000
    if job == "qwen2_lenrange":
        t = hf()
        cfg = t.Qwen2Config(vocab_size=6000, hidden_size=256, intermediate_size=768, num_hidden_layers=4,
                            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                            tie_word_embeddings=True)
        cfg._attn_implementation = "sdpa"
        return t.Qwen2ForCausalLM(cfg), "lm", 6000
    if job in ("neox_curriculum",):
        t = hf()
        cfg = t.GPTNeoXConfig(vocab_size=6000, hidden_size=256, intermediate_size=1024, num_hidden_layers=4,
                              num_attention_heads=4, max_position_embeddings=1024, rotary_pct=0.25,
                              hidden_dropout=0.0, attention_dropout=0.0)
        cfg._attn_implementation = "eager"
        return t.GPTNeoXForCausalLM(cfg), "lm", 6000
    if job == "roberta_padlongest":
        t = hf()
        cfg = t.RobertaConfig(vocab_size=8000, hidden_size=256, intermediate_size=1024, num_hidden_layers=4,
                              num_attention_heads=4, max_position_embeddings=514, num_labels=4)
        return t.RobertaForSequenceClassification(cfg), "cls", 8000
    if job == "effnet_multiscale":
        import torchvision
        return torchvision.models.efficientnet_b0(num_classes=100), "img", 100
    if job == "vit_varbatch":
        from torchvision.models.vision_transformer import VisionTransformer
        return VisionTransformer(image_size=64, patch_size=8, num_layers=4, num_heads=4, hidden_dim=256,
                                 mlp_dim=1024, num_classes=100), "img", 100
    if job == "t5_seq2seq":
        t = hf()
        cfg = t.T5Config(vocab_size=6000, d_model=256, d_kv=64, d_ff=1024, num_layers=3, num_decoder_layers=3,
                         num_heads=4, dropout_rate=0.1, decoder_start_token_id=0, pad_token_id=0)
        return t.T5ForConditionalGeneration(cfg), "s2s", 6000
    if job == "mistral_keeplogits":
        t = hf()
        cfg = t.MistralConfig(vocab_size=8000, hidden_size=256, intermediate_size=704, num_hidden_layers=4,
                              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=1024,
                              sliding_window=None, tie_word_embeddings=False)
        cfg._attn_implementation = "sdpa"
        return t.MistralForCausalLM(cfg), "lm", 8000
    raise SystemExit(f"unknown job {job}")


JOBS = ["llama_tokbudget", "qwen2_lenrange", "neox_curriculum", "roberta_padlongest",
        "effnet_multiscale", "vit_varbatch", "t5_seq2seq", "mistral_keeplogits"]


# ---------------------------------------------------------------- schedules: (batch, shape) per step
def schedule(job, steps, fixed):
    rng = random.Random(1234)
    out = []
    def cycle(items):                      # each value in turn, shuffled per round
        seq = []
        while len(seq) < steps:
            r = list(items); rng.shuffle(r); seq += r
        return seq
    llama = cycle([(32, 64), (16, 128), (8, 256), (4, 512)])
    effs = cycle([96, 128, 160, 192, 224])
    vitb = cycle([8, 16, 24, 32, 48])
    for s in range(steps):
        if job == "llama_tokbudget":        # dynamic batching by a 2048-token budget
            b, l = llama[s]
            d = dict(b=b, l=l)
        elif job == "qwen2_lenrange":       # fixed batch 8, lengths 64..192 (tokens x3)
            d = dict(b=8, l=rng.randint(64, 192))
        elif job == "neox_curriculum":      # lengths ascending 64 -> 352 at batch 4
            d = dict(b=4, l=64 + 32 * s)
        elif job == "roberta_padlongest":   # 16 sequences of long-tailed lengths, padded to the longest
            lens = [min(256, max(16, int(rng.lognormvariate(4.0, 0.6)))) for _ in range(16)]
            d = dict(b=16, lens=lens, l=max(lens))
        elif job == "effnet_multiscale":    # multi-scale training: a random size a step, batch 8
            d = dict(b=8, img=effs[s])
        elif job == "vit_varbatch":         # variable batch size, 64x64 images
            d = dict(b=vitb[s], img=64)
        elif job == "t5_seq2seq":           # batch 8, source 32..256 and target 8..64, independent
            d = dict(b=8, l=rng.randint(32, 256), lt=rng.randint(8, 64))
        elif job == "mistral_keeplogits":   # batch 4, lengths 32..160, logits kept in a list (bug)
            d = dict(b=4, l=rng.randint(32, 160))
        if fixed:
            d.update(fixed)
            if "lens" in d and "l" in fixed:
                d["lens"] = [fixed["l"]] * d["b"]
        out.append(d)
    return out


def make_batch(kind, d, vocab, g):
    b = d["b"]
    if kind == "lm":
        ids = torch.randint(1, vocab, (b, d["l"]), generator=g)
        return dict(input_ids=ids, labels=ids)
    if kind == "cls":
        lens = d["lens"][:b] if len(d["lens"]) >= b else [d["l"]] * b
        L = max(lens)
        ids = torch.full((b, L), 1, dtype=torch.long)          # roberta pad id 1
        mask = torch.zeros((b, L), dtype=torch.long)
        for i, n in enumerate(lens):
            ids[i, :n] = torch.randint(3, vocab, (n,), generator=g)
            mask[i, :n] = 1
        return dict(input_ids=ids, attention_mask=mask, labels=torch.randint(0, 4, (b,), generator=g))
    if kind == "s2s":
        src = torch.randint(1, vocab, (b, d["l"]), generator=g)
        tgt = torch.randint(1, vocab, (b, d["lt"]), generator=g)
        return dict(input_ids=src, attention_mask=torch.ones_like(src), labels=tgt)
    if kind == "img":
        x = torch.randn(b, 3, d["img"], d["img"], generator=g)
        y = torch.randint(0, vocab, (b,), generator=g)
        return (x, y)


# ---------------------------------------------------------------- the loop
def train(model, opt, kind, vocab, sched, keep_logits, on_step=None):
    g = torch.Generator().manual_seed(99)
    kept = []
    for step, d in enumerate(sched):
        if on_step:
            on_step("start", step, d)
        batch = make_batch(kind, d, vocab, g)
        if kind == "img":
            x, y = batch
            out = model(x)
            loss = F.cross_entropy(out, y)
        else:
            out = model(**batch)
            loss = out.loss
            if keep_logits:
                kept.append(out.logits)       # the bug: logits kept "for metrics", graph attached
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if on_step:
            on_step("end", step, d)
        print(f"step {step} {d if 'lens' not in d else dict(b=d['b'], l=d['l'], real=sum(d['lens']))} "
              f"loss {loss.item():.3f}", flush=True)
    return kept


def live_tensor_bytes():
    gc.collect()
    seen = {}
    for o in gc.get_objects():
        try:
            if isinstance(o, torch.Tensor) and o.device.type == "cpu" and not o.is_meta:
                st = o.untyped_storage()
                seen[st.data_ptr()] = max(seen.get(st.data_ptr(), 0), st.nbytes())
        except Exception:
            pass
    return sum(seen.values())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--job", required=True, choices=JOBS)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("-o", "--output")
    ap.add_argument("--fixed", default="")
    ap.add_argument("--measure", choices=["profiler", "memtracker"])
    ap.add_argument("--info", action="store_true")
    ap.add_argument("--name")
    a = ap.parse_args()
    torch.set_num_threads(1)
    model, kind, vocab = build(a.job)
    model.train()
    nparam = sum(p.numel() for p in model.parameters())
    sched = schedule(a.job, a.steps, parse_fixed(a.fixed))
    if a.info:
        print(f"{a.job}: {nparam/1e6:.3f} M params = {nparam*4/MiB:.2f} MiB; AdamW state {2*nparam*4/MiB:.2f} MiB")
        for d in sched:
            print("  ", {k: v for k, v in d.items() if k != 'lens'}, "real tokens" if 'lens' in d else "",
                  sum(d['lens']) if 'lens' in d else "")
        return
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    keep = a.job == "mistral_keeplogits"
    t0 = time.time()
    if a.measure == "profiler":
        from torch.profiler import profile, ProfilerActivity
        from torch._C._profiler import _EventType
        st = {}

        def on_step(ev, step, d):
            if ev == "start":
                st["base"] = live_tensor_bytes()
                st["prof"] = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
                st["prof"].__enter__()
            else:
                p = st["prof"]
                p.__exit__(None, None, None)
                evs = []
                stack = list(p.profiler.kineto_results.experimental_event_tree())
                while stack:
                    n = stack.pop()
                    if n.tag == _EventType.Allocation:
                        evs.append((n.start_time_ns, n.extra_fields.alloc_size, n.extra_fields.total_allocated))
                    stack.extend(n.children)
                evs.sort()
                # the reporter's running total is process-wide and survives profiler sessions:
                # read the rise above its value just before the step's first allocation
                start = evs[0][2] - evs[0][1] if evs else 0
                mx = max([e[2] for e in evs] + [start]) - start
                print(f"MEASURE step {step} base {st['base']/MiB:.1f} MiB rise {mx/MiB:.3f} MiB "
                      f"peak {(st['base']+mx)/MiB:.3f} MiB", flush=True)
        train(model, opt, kind, vocab, sched, keep, on_step)
    elif a.measure == "memtracker":
        from torch.distributed._tools.mem_tracker import MemTracker
        mt = MemTracker()
        mt.track_external(model, opt)

        def on_step(ev, step, d):
            if ev == "start":
                mt.reset_mod_stats()
                mt.__enter__()
            else:
                mt.__exit__(None, None, None)
                snap = mt.get_tracker_snapshot("peak")
                tot = sum(v.get("Total", 0) for dev, v in snap.items() if str(dev) == "cpu")
                print(f"MEASURE-MT step {step} peak {tot/MiB:.1f} MiB", flush=True)
        train(model, opt, kind, vocab, sched, keep, on_step)
    else:
        sys.path.insert(0, "/work/main/python")
        import memdiag
        with memdiag.record(model, opt, output=a.output, name=a.name or a.job):
            train(model, opt, kind, vocab, sched, keep)
    print(f"wall {time.time()-t0:.1f} s", flush=True)


if __name__ == "__main__":
    main()
