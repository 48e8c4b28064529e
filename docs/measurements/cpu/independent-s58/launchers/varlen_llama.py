import sys, random, torch
from transformers import LlamaConfig, LlamaForCausalLM
import memdiag

out, order = sys.argv[1], sys.argv[2]
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=4000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512)
model = LlamaForCausalLM(cfg)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
rng = random.Random(3)
lengths = [rng.randint(32, 256) for _ in range(8)]
if order == "sorted":
    lengths.sort()
print("lengths", lengths, "batches", [2048 // L for L in lengths])
BUDGET = 2048
with memdiag.record(model, opt, output=out, name="varlen-llama"):
    for L in lengths:
        ids = torch.randint(0, 4000, (BUDGET // L, L))
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
