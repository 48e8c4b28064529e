"""J4: Hugging Face Trainer under torchrun (DDP, gloo, CPU), own AdamW passed in."""
import os, sys
import torch, transformers
sys.path.insert(0, os.path.dirname(__file__))
import common, memdiag


class Data(torch.utils.data.Dataset):
    def __init__(self, n):
        self.x = common.ids(n, seed=2)
    def __len__(self):
        return len(self.x)
    def __getitem__(self, i):
        return {"input_ids": self.x[i], "labels": self.x[i]}


model = common.gpt2()
args = transformers.TrainingArguments(
    output_dir="/tmp/s68-j4", per_device_train_batch_size=8, max_steps=6, use_cpu=True,
    report_to=[], save_strategy="no", logging_strategy="no", ddp_backend="gloo",
    dataloader_num_workers=0, disable_tqdm=True, seed=0)
opt = torch.optim.AdamW(model.parameters(), lr=5e-5)
sched = transformers.get_linear_schedule_with_warmup(opt, 1, 6)
trainer = transformers.Trainer(model=model, args=args, train_dataset=Data(256), optimizers=(opt, sched))
with memdiag.record(model, opt, output="r/j4.json", name="j4-trainer"):
    trainer.train()
common.log("done")
