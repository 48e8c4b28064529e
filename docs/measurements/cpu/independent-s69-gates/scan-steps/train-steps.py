"""Three library training jobs, a "main branch" version and pull-request changes.

python train.py JOB CHANGE OUTPUT
  JOB:    resnet18 | bert | llama
  CHANGE: main | adamw | batch32 | refactor | wider | leak | evalgrad | steps8
          | ckpt | bf16 | seq512
Every version records with the same name, seed and steps as main (except the
change itself), random weights built from configurations, nothing downloaded.
"""
import os, sys
import torch
import torch.nn as nn
import torch.nn.functional as F
import memdiag

torch.set_num_threads(1)
job, change, output = sys.argv[1], sys.argv[2], sys.argv[3]
import os
STEPS = int(os.environ.get("SCAN_STEPS", 6))
torch.manual_seed(0)


def resnet():
    import torchvision
    model = torchvision.models.resnet18(num_classes=10)
    batch = 32 if change == "batch32" else 16
    if change == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(1)
    model.train()
    if change == "refactor":
        # PR: "tidy the training loop" - a helper, functional loss, zero_grad first
        def train_step(images, targets):
            opt.zero_grad(set_to_none=True)
            logits = model(images)
            F.cross_entropy(logits, targets).backward()
            opt.step()
        with memdiag.record(model, opt, output=output, name="resnet18", seed=0):
            for _ in range(STEPS):
                images = torch.randn(batch, 3, 128, 128, generator=g)
                targets = torch.randint(0, 10, (batch,), generator=g)
                train_step(images, targets)
        return
    loss_fn = nn.CrossEntropyLoss()
    with memdiag.record(model, opt, output=output, name="resnet18", seed=0):
        for _ in range(STEPS):
            x = torch.randn(batch, 3, 128, 128, generator=g)
            y = torch.randint(0, 10, (batch,), generator=g)
            out = model(x)
            loss = loss_fn(out, y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


def bert():
    from transformers import BertConfig, BertForSequenceClassification
    cfg = BertConfig(vocab_size=30522, hidden_size=256, num_hidden_layers=4,
                     num_attention_heads=4,
                     intermediate_size=3072 if change == "wider" else 1024,
                     max_position_embeddings=512, num_labels=2)
    model = BertForSequenceClassification(cfg)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5)
    batch, seq = 8, 64
    g = torch.Generator().manual_seed(1)
    val_ids = torch.randint(0, 30522, (batch, seq), generator=g)
    history = []
    with memdiag.record(model, opt, output=output, name="bert", seed=0):
        for _ in range(STEPS):
            ids = torch.randint(0, 30522, (batch, seq), generator=g)
            labels = torch.randint(0, 2, (batch,), generator=g)
            out = model(input_ids=ids, labels=labels)
            out.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if change == "leak":
                # PR: "log predictions" - keeps every step's logits with their graph
                history.append(out.logits)
            if change == "evalgrad":
                # PR: "track validation logits each step" - forgot torch.no_grad()
                model.eval()
                val_out = model(input_ids=val_ids)
                val_pred = val_out.logits.argmax(-1)
                model.train()


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=8000, hidden_size=256, intermediate_size=688,
                      num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=4,
                      max_position_embeddings=1024, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg)
    model.train()
    if change == "ckpt":
        model.gradient_checkpointing_enable()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    batch, seq = 4, (512 if change == "seq512" else 256)
    g = torch.Generator().manual_seed(1)
    preds = []
    with memdiag.record(model, opt, output=output, name="llama", seed=0):
        for _ in range(STEPS):
            ids = torch.randint(0, 8000, (batch, seq), generator=g)
            if change == "bf16":
                with torch.autocast("cpu", dtype=torch.bfloat16):
                    loss = model(input_ids=ids, labels=ids).loss
            elif change == "leak":
                # PR: "collect logits for a perplexity/accuracy metric" - never detached or freed
                out = model(input_ids=ids, labels=ids)
                preds.append(out.logits)
                loss = out.loss
            else:
                loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)


{"resnet18": resnet, "bert": bert, "llama": llama}[job]()
