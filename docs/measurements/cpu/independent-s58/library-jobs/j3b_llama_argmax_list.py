# Bug: softmax probabilities appended to a list every step, not detached (kept on device).
import torch, transformers as T, memdiag, time
from common import args
a = args("/tmp/indep58/reports/j3b.json")
cfg = T.LlamaConfig(vocab_size=4096, hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256)
model = T.LlamaForCausalLM(cfg)
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
def loader():
    for _ in range(a.steps):
        ids = torch.randint(0, 4096, (4, 64))
        yield {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": ids}
all_probs = []
t = time.time()
with memdiag.record(model, opt, output=a.output, name="j3b-llama-argmax-list"):
    for batch in loader():
        out = model(**batch)
        loss = out.loss
        probs = out.logits.argmax(dim=-1)      # BUG: int64 predictions kept on device
        all_probs.append(probs)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
print("done", time.time() - t, len(all_probs))
