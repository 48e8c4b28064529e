"""Distributed jobs for testing memdiag under torchrun (Gloo, CPU)."""
import argparse, os, sys
import torch
import torch.nn as nn
import torch.distributed as dist
import memdiag

p = argparse.ArgumentParser()
p.add_argument("--job", required=True)
p.add_argument("--batch", type=int, default=4)
p.add_argument("--extra0", type=int, default=0, help="extra samples on rank 0")
p.add_argument("--steps", type=int, default=5)
p.add_argument("--seq", type=int, default=64)
p.add_argument("--out", required=True)
p.add_argument("--name", default=None)
a = p.parse_args()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
B = a.batch + (a.extra0 if rank == 0 else 0)


def lm_loop(model, opt, vocab, seq, rec_name, keep=False):
    kept = []
    g = torch.Generator().manual_seed(rank + 1)
    if os.environ.get("WARM"):
        for _ in range(2):
            ids = torch.randint(0, vocab, (B, seq)); model(input_ids=ids, labels=ids).loss.backward(); opt.zero_grad(set_to_none=True)
    with memdiag.record(model, opt, output=a.out, name=rec_name, steps=a.steps):
        for step in range(a.steps):
            ids = torch.randint(0, vocab, (B, seq), generator=g)
            out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if keep:
                kept.append(out.logits)
    return kept


if a.job == "fsdp_gpt2_blocks":
    # FSDP2 per block + root, GPT2 wide/deep, tiny batch, AdamW -> optimizer_state
    from transformers import GPT2Config, GPT2LMHeadModel
    from torch.distributed.fsdp import fully_shard
    cfg = GPT2Config(n_layer=6, n_embd=512, n_head=8, vocab_size=16000, n_positions=128)
    model = GPT2LMHeadModel(cfg)
    for blk in model.transformer.h:
        fully_shard(blk)
    fully_shard(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    lm_loop(model, opt, cfg.vocab_size, 16, a.name or "fsdp-gpt2-blocks")

elif a.job == "fsdp_llama_root":
    # FSDP2 only at the root: whole model gathered from forward to backward.
    # Big model, tiny batch, plain SGD (no state) -> parameters
    from transformers import LlamaConfig, LlamaForCausalLM
    from torch.distributed.fsdp import fully_shard
    cfg = LlamaConfig(hidden_size=512, intermediate_size=1536, num_hidden_layers=6,
                      num_attention_heads=8, num_key_value_heads=8, vocab_size=16000,
                      max_position_embeddings=128)
    model = LlamaForCausalLM(cfg)
    fully_shard(model)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    lm_loop(model, opt, cfg.vocab_size, 16, a.name or "fsdp-llama-root")

elif a.job == "fsdp_bert_noreshard":
    # FSDP2 per layer, reshard_after_forward=False, small BERT, large batch x seq -> activations
    from transformers import BertConfig, BertForMaskedLM
    from torch.distributed.fsdp import fully_shard
    cfg = BertConfig(hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=512, vocab_size=1000, max_position_embeddings=256)
    model = BertForMaskedLM(cfg)
    for layer in model.bert.encoder.layer:
        fully_shard(layer, reshard_after_forward=False)
    fully_shard(model, reshard_after_forward=False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    lm_loop(model, opt, cfg.vocab_size, a.seq, a.name or "fsdp-bert-noreshard")

elif a.job == "ddp_resnet":
    # DDP resnet18 on 64x64 images; batch varies between launches -> activations
    import torchvision
    from torch.nn.parallel import DistributedDataParallel as DDP
    model = DDP(torchvision.models.resnet18(num_classes=10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator().manual_seed(rank + 1)
    lossf = nn.CrossEntropyLoss()
    if os.environ.get("WARM"):
        for _ in range(2):
            lossf(model(torch.randn(B, 3, 64, 64)), torch.zeros(B, dtype=torch.long)).backward(); opt.zero_grad(set_to_none=True)
    with memdiag.record(model, opt, output=a.out, name=a.name or "ddp-resnet18", steps=a.steps):
        for step in range(a.steps):
            x = torch.randn(B, 3, 64, 64, generator=g)
            y = torch.randint(0, 10, (B,), generator=g)
            loss = lossf(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

elif a.job == "zero_imbalanced":
    # ZeroRedundancyOptimizer(Adam): first param (huge embedding) lands on rank 0,
    # the small rest on rank 1 -> optimizer_state, rank 0 binds
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel as DDP

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(100000, 128)   # 12.8M params = 48.8 MiB
            self.l1 = nn.Linear(128, 256)
            self.l2 = nn.Linear(256, 10)

        def forward(self, x):
            return self.l2(torch.relu(self.l1(self.emb(x).mean(1))))

    net = Net()
    model = DDP(net)
    opt = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.Adam, lr=1e-3)
    if rank == 0:
        print("partition sizes:", [sum(p.numel() for g in gs for p in g["params"]) for gs in opt._partition_parameters()], file=sys.stderr)
    g = torch.Generator().manual_seed(rank + 1)
    lossf = nn.CrossEntropyLoss()
    with memdiag.record(model, opt, output=a.out, name=a.name or "zero-imbalanced", steps=a.steps):
        for step in range(a.steps):
            x = torch.randint(0, 100000, (B, 16), generator=g)
            y = torch.randint(0, 10, (B,), generator=g)
            loss = lossf(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

elif a.job == "ddp_mlp_extra":
    # DDP MLP, activation-heavy, rank 0 gets extra samples -> activations, rank 0 binds
    from torch.nn.parallel import DistributedDataParallel as DDP
    net = nn.Sequential(*[m for _ in range(6) for m in (nn.Linear(512, 512), nn.GELU())], nn.Linear(512, 10))
    model = DDP(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(rank + 1)
    lossf = nn.CrossEntropyLoss()
    with memdiag.record(model, opt, output=a.out, name=a.name or "ddp-mlp-extra", steps=a.steps):
        for step in range(a.steps):
            x = torch.randn(B, 512, generator=g)
            y = torch.randint(0, 10, (B,), generator=g)
            loss = lossf(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

elif a.job == "ddp_gpt2_leak":
    # DDP GPT2 small, logits kept in a list every step -> retained_graph (kept outputs)
    from transformers import GPT2Config, GPT2LMHeadModel
    from torch.nn.parallel import DistributedDataParallel as DDP
    cfg = GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=8000, n_positions=128)
    model = DDP(GPT2LMHeadModel(cfg))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    lm_loop(model, opt, cfg.vocab_size, 64, a.name or "ddp-gpt2-leak", keep=True)
else:
    raise SystemExit("unknown job " + a.job)

dist.barrier()
dist.destroy_process_group()
