# Bug: running loss sum kept graph-connected (total_loss += loss).
import torch, transformers as T, memdiag, time
from common import args
a = args("/tmp/indep58/reports/j4.json")
cfg = T.T5Config(vocab_size=4096, d_model=128, d_kv=32, d_ff=512, num_layers=2,
                 num_decoder_layers=2, num_heads=4, decoder_start_token_id=0, pad_token_id=0)
model = T.T5ForConditionalGeneration(cfg)
model.train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
def loader():
    for _ in range(a.steps):
        src = torch.randint(1, 4096, (8, 64))
        yield {"input_ids": src, "attention_mask": torch.ones_like(src),
               "labels": torch.randint(1, 4096, (8, 32))}
total_loss = 0.0
t = time.time()
with memdiag.record(model, opt, output=a.output, name="j4-t5-loss-sum"):
    for batch in loader():
        out = model(**batch)
        out.loss.backward()
        total_loss += out.loss                   # BUG: graph-connected running sum
        opt.step()
        opt.zero_grad(set_to_none=True)
print("done", time.time() - t, float(total_loss))
