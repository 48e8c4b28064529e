import sys, torch
from transformers import GPT2Config, GPT2LMHeadModel
import memdiag

torch.manual_seed(0)
cfg = GPT2Config(vocab_size=2000, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                 resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
model = GPT2LMHeadModel(cfg)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
val_ids = torch.randint(0, 2000, (8, 64))
predictions = []
with memdiag.record(model, opt, output=sys.argv[1], name="gpt2-evalleak"):
    for step in range(8):
        opt.zero_grad(set_to_none=True)
        ids = torch.randint(0, 2000, (8, 64))
        out = model(input_ids=ids, labels=ids); loss = out.loss; predictions.append(out.logits)  # TRAIN-KEEP
        loss.backward()
        opt.step()
        if False:
            model.eval()
            with torch.no_grad():
                predictions.append(model(input_ids=val_ids).logits)   # EVAL-LINE: kept on device
            model.train()

