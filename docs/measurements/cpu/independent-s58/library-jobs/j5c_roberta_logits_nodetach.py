# Bug: per-step logits kept "for eval" in a dict, detached but on the device.
import torch, transformers as T, memdiag, time
from common import args
a = args("/tmp/indep58/reports/j5c.json")
cfg = T.RobertaConfig(vocab_size=8192, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=512, max_position_embeddings=130)
model = T.RobertaForMaskedLM(cfg)
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
def loader():
    for _ in range(a.steps):
        ids = torch.randint(5, 8192, (8, 64))
        labels = ids.clone(); labels[torch.rand(ids.shape) > 0.15] = -100
        yield {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
eval_logits = {}
t = time.time()
with memdiag.record(model, opt, output=a.output, name="j5c-roberta-logits-nodetach"):
    for step, batch in enumerate(loader()):
        out = model(**batch)
        out.loss.backward()
        eval_logits[step] = out.logits  # BUG: kept, not detached
        opt.step()
        opt.zero_grad(set_to_none=True)
print("done", time.time() - t, len(eval_logits))
