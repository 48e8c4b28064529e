"""J2: accelerate launch --multi_gpu --num_processes 2, Accelerator(cpu=True), GPT-2, AdamW."""
import os, sys
import torch
from torch.utils.data import DataLoader, TensorDataset
from accelerate import Accelerator
sys.path.insert(0, os.path.dirname(__file__))
import common, memdiag

acc = Accelerator(cpu=True)
common.log(acc.distributed_type, acc.num_processes)
model = common.gpt2()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
dl = DataLoader(TensorDataset(common.ids(96, seed=1)), batch_size=8, shuffle=False)
model, opt, dl = acc.prepare(model, opt, dl)
with memdiag.record(model, opt, output="r/j2-{rank}.json", name="j2-accelerate"):
    for (ids,) in dl:
        out = model(input_ids=ids, labels=ids)
        acc.backward(out.loss)
        opt.step()
        opt.zero_grad()
common.log("done, steps", len(dl))
acc.end_training()
