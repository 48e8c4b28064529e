#!/usr/bin/env python3
"""The arithmetic behind expected.json: parameter, gradient and optimizer-state
MiB of each job (counted on the built model, no step run), and the tensors its
autograd graph saves for backward, from shapes and dtypes by hand-derived
per-layer counts (written out below). Nothing here trains or measures memory.

    python python/jobs/estimates.py            # every job, both sizes
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus  # noqa: E402

MIB = 1 << 20
F32 = 4


def resnet_saved_per_image(arch, image, head=None):
    """fp32 elements autograd keeps per image in torchvision's ResNet:
    conv -> its input; BN -> its input; in-place ReLU -> its result (the BN
    output's storage, also the next conv's input); `out += identity` saves
    nothing; maxpool -> its input and int64 indices; fc -> its input;
    cross_entropy -> the log_softmax result and the int64 target."""
    basic, counts = {"resnet18": (True, [2, 2, 2, 2]), "resnet50": (False, [3, 4, 6, 3])}[arch]
    h1 = (image - 1) // 2 + 1          # conv1 7x7/2
    h = (h1 - 1) // 2 + 1              # maxpool 3x3/2
    n = 3 * image * image + 2 * 64 * h1 * h1 + 64 * h * h * (1 + 2)   # input, conv1, bn1/relu, pool + int64 idx
    inplanes = 64
    for i, blocks in enumerate(counts):
        planes = 64 << i
        for j in range(blocks):
            s = 2 if (i > 0 and j == 0) else 1
            ho = (h - 1) // s + 1
            if basic:    # conv1(s) bn1 relu conv2 bn2 +id relu
                out = planes
                n += 4 * planes * ho * ho
            else:        # conv1 1x1, conv2 3x3(s), conv3 1x1 (x4), each with BN; ReLU after 1 and 2 and the add
                out = 4 * planes
                n += 2 * planes * h * h + 2 * planes * ho * ho + 2 * out * ho * ho
            if s != 1 or inplanes != out:
                n += out * ho * ho     # downsample conv output, saved by its BN
            inplanes, h = out, ho
    n += inplanes                      # avgpool output, saved by fc
    if head:
        n += 2 * head                  # each hidden Linear's ReLU'd output, saved by the next Linear
    return (n + 1000 + 2) * F32        # log_softmax result, int64 target


def vit_saved_per_image(s, frozen=False):
    """Per token per block (SDPA's flash/efficient kernel: dropout is 0 in
    torchvision's ViT): block input, ln_1 out, packed qkv copy (3d), SDPA
    output, its permuted copy for out_proj, residual sum (ln_2 input), ln_2
    out, fc1 out (mlp), GELU out (mlp) = 9d + 2 mlp. Then the final norm's
    input and output (the head's input is a view of it). Frozen blocks whose
    input needs no grad save nothing; the image is saved by conv_proj."""
    tokens = (s["image"] // s["patch"]) ** 2 + 1
    d, blocks = s["hidden"], (1 if frozen else s["layers"])
    per_block = 9 * d + 2 * s["mlp"]
    n = tokens * (blocks * per_block + 2 * d) + s["classes"]
    if not frozen:
        n += 3 * s["image"] ** 2
    return n * F32


def bert_saved_per_token(s, gpu, amp=False):
    """Per token per layer, fp32: layer input (q/k/v linears), q, k, v, [GPU
    efficient SDPA: its output] or [CPU math SDPA, chosen because attention
    dropout is 0.1: scaled q and k copies instead of q and k, plus softmax
    out, dropout mask (bytes) and dropout out, h*S each], the merged-heads
    copy (dense), dropout mask, LN1 in and out, fc1 out, GELU out, dropout
    mask, LN2 in: 18.5d (GPU) / 16.5d + 2.25hS (CPU). Embeddings: LN in +
    dropout mask + ids; MLM head: dense in, GELU in, LN in, LN out (4d); the
    logits and the log_softmax result (2V). With autocast: linears keep
    16-bit inputs/outputs, norms fp32: ~11d, logits 16-bit + fp32
    log_softmax (1.5V)."""
    d, L, h, S, V = s["hidden"], s["layers"], s["heads"], s["seq"], s["vocab"]
    attn = 0 if gpu else 2.25 * h * S
    if amp:
        per_layer, logits = 11 * d + attn / 2, 1.5 * V
    else:
        per_layer, logits = (18.5 if gpu else 16.5) * d + attn, 2 * V
    return (L * per_layer + 1.25 * d + 2 + 4 * d + logits) * F32


def gpt2_saved_per_token(s, gpu, seq):
    """Per token per block, fp32: ln_1 in and out, c_attn out (3d: q, k, v
    are views of it), [GPU efficient SDPA: output] or [CPU math SDPA
    (dropout 0.1): scaled q and k copies + softmax out, dropout mask and
    out, h*S each], merged-heads copy (c_proj), dropout mask, ln_2 in and
    out, c_fc out (4d), gelu_new as transformers writes it
    (0.5*x*(1+tanh(...)) saves tanh out, 0.5x and 1+tanh: 12d more), its
    output (4d), dropout mask: 29.5d (GPU) / 30.5d + 2.25hS (CPU). Then
    dropout mask after embeddings, ln_f in and out, and 2V: the logits
    (kept by the output) and the log_softmax result."""
    d, L, h, V = s["hidden"], s["layers"], s["heads"], s["vocab"]
    per_layer = 29.5 * d if gpu else 30.5 * d + 2.25 * h * seq
    return (L * per_layer + 2.25 * d + 2 * V) * F32


def persistent(name, size):
    """Parameter, gradient and optimizer-state MiB (AdamW: exp_avg +
    exp_avg_sq; SGD momentum: one buffer), from the built model."""
    family, build, _, _ = corpus.JOBS[name]
    s = dict(corpus.SIZES[family][size], steps=6)
    model, opt, _, _ = build(s, torch.device("cpu"))
    params = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for g in opt.param_groups for p in g["params"])
    per = 2 if isinstance(opt, torch.optim.AdamW) else 1
    return params * F32 / MIB, trainable * F32 / MIB, per * trainable * F32 / MIB


def activations(name, size):
    """(MiB saved for backward at the end of one forward, tokens or images)."""
    family = corpus.JOBS[name][0]
    s = corpus.SIZES[family][size]
    gpu = size == "gpu"
    if family.startswith("resnet"):
        return s["batch"] * resnet_saved_per_image(s["arch"], s["image"], s.get("head")) / MIB, s["batch"]
    if family.startswith("vit"):
        return s["batch"] * vit_saved_per_image(s, frozen=family == "vit-frozen") / MIB, s["batch"]
    if family.startswith("bert"):
        tokens = s["batch"] * s["seq"]
        return tokens * bert_saved_per_token(s, gpu, amp=family == "bert-amp") / MIB, tokens
    if family == "gpt2-dyn":   # the range over lengths
        per = [(s["budget"] // n) * n * gpt2_saved_per_token(s, gpu, n) / MIB for n in s["lengths"]]
        return (min(per), max(per)), s["budget"]
    tokens = s.get("micro", s.get("batch")) * s["seq"]
    return tokens * gpt2_saved_per_token(s, gpu, s["seq"]) / MIB, tokens


def main():
    print(f"{'job':22} {'size':4} {'params':>8} {'grads':>7} {'opt':>8} {'saved acts':>14}  MiB")
    for name in corpus.JOBS:
        for size in ("cpu", "gpu"):
            p, g, o = persistent(name, size)
            a, _ = activations(name, size)
            a = f"{a[0]:.0f}-{a[1]:.0f}" if isinstance(a, tuple) else f"{a:.1f}"
            print(f"{name:22} {size:4} {p:8.1f} {g:7.1f} {o:8.1f} {a:>14}")


if __name__ == "__main__":
    main()
