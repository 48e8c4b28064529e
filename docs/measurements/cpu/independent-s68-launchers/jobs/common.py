"""Shared builders for the launcher jobs (random weights, nothing downloaded)."""
import os
import torch
import torch.nn as nn

V, T, E, L, H = 8192, 128, 128, 2, 4   # GPT-2: vocab, positions, hidden, layers, heads


def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(vocab_size=V, n_positions=T, n_embd=E, n_layer=L, n_head=H,
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                     activation_function="gelu", bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    return GPT2LMHeadModel(cfg)


def ids(batch, seq=T, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, V, (batch, seq), generator=g)


def mlp(widths):
    torch.manual_seed(0)
    layers = []
    for a, b in zip(widths[:-1], widths[1:]):
        layers += [nn.Linear(a, b), nn.ReLU()]
    return nn.Sequential(*layers[:-1])


def mib(model):
    return sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20


def rank():
    import torch.distributed as dist
    return dist.get_rank() if dist.is_initialized() else int(os.environ.get("RANK", 0))


def log(*a):
    print(f"[rank {rank()}]", *a, flush=True)
