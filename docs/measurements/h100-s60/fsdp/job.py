import os, sys, torch, torch.distributed as dist
from transformers import LlamaConfig, LlamaForCausalLM
from torch.distributed.fsdp import fully_shard
import memdiag
mode, batch, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
dist.init_process_group("nccl")
torch.cuda.set_device(0)
torch.manual_seed(0)
cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                  num_key_value_heads=16, vocab_size=32000, max_position_embeddings=512)
model = LlamaForCausalLM(cfg).cuda()
if mode == "blocks":
    for layer in model.model.layers:
        fully_shard(layer)
fully_shard(model)
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
with memdiag.record(model, opt, output=out, steps=4):
    for _ in range(4):
        ids = torch.randint(0, 32000, (batch, 256), device="cuda")
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
dist.destroy_process_group()
