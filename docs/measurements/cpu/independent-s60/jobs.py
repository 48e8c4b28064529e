"""Independent jobs for memdiag (session 60), CPU.

python jobs.py --job NAME [--batch B] [--steps N] [--opt ...] -o REPORT

Every model is built from a configuration with random weights; nothing is
downloaded. Each job is a plain training loop wrapped in memdiag.record.
"""
import argparse
import dataclasses
import random

import torch
import torch.nn as nn
import torch.nn.functional as F

import memdiag

p = argparse.ArgumentParser()
p.add_argument("--job", required=True)
p.add_argument("--batch", type=int, default=None)
p.add_argument("--steps", type=int, default=6)
p.add_argument("--seq", type=int, default=None)
p.add_argument("--gc", type=int, default=0, help="qwen2: gradient checkpointing on")
p.add_argument("--nograd", type=int, default=1, help="effnet-val: validation under no_grad")
p.add_argument("--order", default="random", help="varsize jobs: random|ascending|fixed")
p.add_argument("--given-bs", type=int, default=None, help="batch_size= given to record()")
p.add_argument("--variant", default=None)
p.add_argument("--px", type=int, default=None)
p.add_argument("--lab", type=int, default=64, help="whisper: label length with --order fixed")
p.add_argument("-o", "--output", required=True)
a = p.parse_args()
torch.manual_seed(0)
random.seed(0)


def rec(model, opt, default_b, name=None, **kw):
    kw2 = dict(output=a.output, name=name or a.job, steps=a.steps)
    if a.given_bs is not None:
        kw2["batch_size"] = a.given_bs
    if a.variant:
        kw2["variant"] = a.variant
    kw2.update(kw)
    return memdiag.record(model, opt, **kw2)


# ---------------------------------------------------------------- whisper
def whisper_dict():
    """Whisper encoder-decoder, inputs as a dict via model(**batch); labels of a
    random length 16..128 per step, the encoder input always 80 x 1500 frames."""
    from transformers import WhisperConfig, WhisperForConditionalGeneration
    cfg = WhisperConfig(vocab_size=4000, d_model=128, encoder_layers=2, decoder_layers=2,
                        encoder_attention_heads=4, decoder_attention_heads=4,
                        encoder_ffn_dim=512, decoder_ffn_dim=512, num_mel_bins=80,
                        max_source_positions=750, max_target_positions=128,
                        pad_token_id=0, decoder_start_token_id=1, eos_token_id=2, bos_token_id=1)
    model = WhisperForConditionalGeneration(cfg).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    B = a.batch or 4
    rng = random.Random(1)
    lengths = [rng.randint(16, 128) for _ in range(a.steps)]
    if a.order == "fixed":
        lengths = [a.lab] * a.steps
    with rec(model, opt, B):
        for L in lengths:
            batch = {"input_features": torch.randn(B, 80, 1500),
                     "labels": torch.randint(3, 4000, (B, L))}
            opt.zero_grad(set_to_none=True)
            out = model(**batch)
            out.loss.backward()
            opt.step()


# ---------------------------------------------------------------- qwen2
def qwen_cfg():
    from transformers import Qwen2Config
    return Qwen2Config(vocab_size=8192, hidden_size=256, num_hidden_layers=4,
                       num_attention_heads=4, num_key_value_heads=2, intermediate_size=1024,
                       max_position_embeddings=512, tie_word_embeddings=False,
                       attn_implementation="sdpa")


def qwen2(bf16=False):
    """Qwen2 causal LM, AdamW; --gc 1 turns on HF gradient checkpointing;
    bf16: the forward under torch.autocast('cpu', bfloat16)."""
    from transformers import Qwen2ForCausalLM
    model = Qwen2ForCausalLM(qwen_cfg()).train()
    if a.gc:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    B, T = a.batch or 8, a.seq or 256
    with rec(model, opt, B, name="qwen2"):
        for _ in range(a.steps):
            ids = torch.randint(0, 8192, (B, T))
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                out = model(input_ids=ids, labels=ids, use_cache=False)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- gpt-neox
def neox_wide():
    """GPT-NeoX with a 50304-token vocabulary, 2 x 128 layers, untied embeddings,
    Adam, a small batch: 13.3 M parameters, 12.9 M of them the two vocab matrices."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    cfg = GPTNeoXConfig(vocab_size=50304, hidden_size=128, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=512,
                        max_position_embeddings=256, tie_word_embeddings=False)
    model = GPTNeoXForCausalLM(cfg).train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    B, T = a.batch or 2, a.seq or 32
    with rec(model, opt, B):
        for _ in range(a.steps):
            ids = torch.randint(0, 50304, (B, T))
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


def neox_hidden_list():
    """GPT-NeoX small, output_hidden_states=True, each step's hidden states
    appended to a list (a 'probe' buffer), never detached."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM
    cfg = GPTNeoXConfig(vocab_size=8192, hidden_size=128, num_hidden_layers=4,
                        num_attention_heads=4, intermediate_size=512,
                        max_position_embeddings=256)
    model = GPTNeoXForCausalLM(cfg).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    B, T = a.batch or 8, a.seq or 128
    probes = []
    with rec(model, opt, B):
        for _ in range(a.steps):
            ids = torch.randint(0, 8192, (B, T))
            out = model(input_ids=ids, labels=ids, output_hidden_states=True)
            probes.append(out.hidden_states)          # the bug: tuple of 5 graph-connected tensors
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    print("probes kept:", len(probes))


# ---------------------------------------------------------------- torchvision
def swin_frozen():
    """torchvision swin_t, whole backbone frozen, only the 768->1000 head trained (AdamW)."""
    import torchvision
    model = torchvision.models.swin_t(weights=None).train()
    for n_, p_ in model.named_parameters():
        p_.requires_grad_(n_.startswith("head."))
    opt = torch.optim.AdamW([p_ for p_ in model.parameters() if p_.requires_grad], lr=1e-3)
    B, px = a.batch or 8, a.px or 112
    with rec(model, opt, B):
        for _ in range(a.steps):
            x, y = torch.randn(B, 3, px, px), torch.randint(0, 1000, (B,))
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


def regnet_metrics():
    """regnet_y_400mf 64 px, SGD momentum; the loop keeps its metrics on the device as
    graph-connected tensors: losses.append(loss) and a running mean of the softmax."""
    import torchvision
    model = torchvision.models.regnet_y_400mf(weights=None, num_classes=100).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    B, px = a.batch or 16, a.px or 64
    losses = []
    conf = torch.zeros(100)
    with rec(model, opt, B):
        for _ in range(a.steps):
            x, y = torch.randn(B, 3, px, px), torch.randint(0, 100, (B,))
            logits = model(x)
            loss = F.cross_entropy(logits, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss)                                  # bug 1
            conf = conf + logits.softmax(-1).mean(0)             # bug 2
    print("mean loss", torch.stack(losses).mean().item(), conf.sum().item())


def effnet_val():
    """efficientnet_b0 64 px, AdamW; a validation forward of 2B images after each
    training step, in eval() mode, under torch.no_grad() (--nograd 1) or not (0); the
    loop keeps val_loss in a variable (logged at the next step)."""
    import torchvision
    model = torchvision.models.efficientnet_b0(weights=None, num_classes=100).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    B, px = a.batch or 16, a.px or 64
    xv, yv = torch.randn(2 * B, 3, px, px), torch.randint(0, 100, (2 * B,))
    val_loss = None
    log = []
    with rec(model, opt, B):
        for _ in range(a.steps):
            opt.zero_grad(set_to_none=True)
            if val_loss is not None:
                log.append(float(val_loss))
            x, y = torch.randn(B, 3, px, px), torch.randint(0, 100, (B,))
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            model.eval()
            if a.nograd:
                with torch.no_grad():
                    val_loss = F.cross_entropy(model(xv), yv)
            else:
                val_loss = F.cross_entropy(model(xv), yv)
            model.train()
    print("val", log)


def convnext_varsize():
    """convnext_tiny, fixed batch, the image side varies step to step
    (random order, ascending, or fixed at the largest), SGD momentum."""
    import torchvision
    model = torchvision.models.convnext_tiny(weights=None, num_classes=100).train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    B = a.batch or 8
    sides = [64, 96, 128, 160]
    rng = random.Random(2)
    if a.order == "random":
        seq = [rng.choice(sides) for _ in range(a.steps)]
    elif a.order == "ascending":
        seq = [sides[min(i * len(sides) // a.steps, 3)] for i in range(a.steps)]
    else:
        seq = [a.px or 160] * a.steps
    print("sides", seq)
    with rec(model, opt, B):
        for px in seq:
            x, y = torch.randn(B, 3, px, px), torch.randint(0, 100, (B,))
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- t5 with a dataclass
@dataclasses.dataclass
class Seq2SeqBatch:
    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    labels: torch.Tensor


class T5Task(nn.Module):
    """A Lightning-style wrapper: forward takes the dataclass."""

    def __init__(self):
        super().__init__()
        from transformers import T5Config, T5ForConditionalGeneration
        self.net = T5ForConditionalGeneration(T5Config(
            vocab_size=8192, d_model=256, d_kv=32, d_ff=1024, num_layers=3,
            num_decoder_layers=3, num_heads=8, decoder_start_token_id=0, pad_token_id=0))

    def forward(self, b: Seq2SeqBatch):
        return self.net(input_ids=b.input_ids, attention_mask=b.attention_mask, labels=b.labels).loss


def t5_dataclass():
    """T5 (3+3 x 256), AdamW, batch as a dataclass; source lengths bucketed
    (64..256, --order random|ascending|fixed), target 32 tokens."""
    model = T5Task().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    B = a.batch or 8
    buckets = [64, 128, 192, 256]
    rng = random.Random(3)
    if a.order == "random":
        seq = [rng.choice(buckets) for _ in range(a.steps)]
    elif a.order == "ascending":
        seq = [buckets[min(i * 4 // a.steps, 3)] for i in range(a.steps)]
    else:
        seq = [a.seq or 256] * a.steps
    print("lengths", seq)
    with rec(model, opt, B):
        for L in seq:
            b = Seq2SeqBatch(torch.randint(1, 8192, (B, L)), torch.ones(B, L, dtype=torch.long),
                             torch.randint(1, 8192, (B, 32)))
            loss = model(b)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


JOBS = {
    "whisper-dict": whisper_dict,
    "qwen2": qwen2,
    "qwen2-bf16": lambda: qwen2(bf16=True),
    "neox-wide": neox_wide,
    "neox-hidden-list": neox_hidden_list,
    "swin-frozen": swin_frozen,
    "regnet-metrics": regnet_metrics,
    "effnet-val": effnet_val,
    "convnext-varsize": convnext_varsize,
    "t5-dataclass": t5_dataclass,
}
JOBS[a.job]()
