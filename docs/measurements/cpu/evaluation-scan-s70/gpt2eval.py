"""GPT-2 (transformers, from a config, random weights) trained at batch B with a no_grad
evaluation of 64 x 128 tokens every other step: python3 gpt2eval.py B STEPS OUT."""
import sys
import torch
import transformers as T
import memdiag

b, steps, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
torch.manual_seed(0)
model = T.GPT2LMHeadModel(T.GPT2Config(vocab_size=4000, n_positions=128, n_embd=256, n_layer=4, n_head=4))
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
held_out = torch.randint(0, 4000, (64, 128))
with memdiag.record(model, opt, output=out):
    for step in range(steps):
        model.train()
        ids = torch.randint(0, 4000, (b, 128))
        model(input_ids=ids, labels=ids).loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 2 == 1:
            model.eval()
            with torch.no_grad():
                model(input_ids=held_out, labels=held_out).loss.item()
