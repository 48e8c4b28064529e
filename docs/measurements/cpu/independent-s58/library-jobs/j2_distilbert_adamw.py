# Clean, optimizer-state dominated: DistilBERT with a 30522-token embedding, tiny batch, AdamW.
import torch, transformers as T, memdiag, time
from common import args
a = args("/tmp/indep58/reports/j2.json")
cfg = T.DistilBertConfig(vocab_size=30522, dim=256, n_layers=2, n_heads=4, hidden_dim=1024,
                         max_position_embeddings=128, num_labels=2)
model = T.DistilBertForSequenceClassification(cfg)
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
def loader():
    for _ in range(a.steps):
        ids = torch.randint(0, 30522, (2, 16))
        yield {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": torch.randint(0, 2, (2,))}
t = time.time()
with memdiag.record(model, opt, output=a.output, name="j2-distilbert-adamw"):
    for batch in loader():
        out = model(**batch)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
print("done", time.time() - t)
