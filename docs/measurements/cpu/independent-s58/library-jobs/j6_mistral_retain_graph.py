# Bug: backward(retain_graph=True) every step (nothing else kept).
import torch, transformers as T, memdiag, time
from common import args
a = args("/tmp/indep58/reports/j6.json")
cfg = T.MistralConfig(vocab_size=4096, hidden_size=128, intermediate_size=344, num_hidden_layers=3,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
model = T.MistralForCausalLM(cfg)
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
def loader():
    for _ in range(a.steps):
        ids = torch.randint(0, 4096, (4, 64))
        yield {"input_ids": ids, "labels": ids}
t = time.time()
with memdiag.record(model, opt, output=a.output, name="j6-mistral-retain-graph"):
    for batch in loader():
        out = model(**batch)
        out.loss.backward(retain_graph=True)     # BUG: graph kept until `out` is replaced
        opt.step()
        opt.zero_grad(set_to_none=True)
print("done", time.time() - t)
