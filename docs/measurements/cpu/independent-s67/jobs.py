"""Independent tester s67: ten library-model jobs about memory that grows over
steps (leaks) or only looks like it does (controls). Random weights from
configurations; nothing downloaded. Usage: jobs.py --job NAME --steps N -o REPORT
"""
import argparse, sys
import torch
import torch.nn as nn
import torch.nn.functional as F
import memdiag

torch.manual_seed(0)
torch.set_num_threads(1)
V = 2000  # vocabulary of the text models


def gpt2(n_layer=4, n_embd=256):
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel(GPT2Config(vocab_size=V, n_positions=256, n_embd=n_embd, n_layer=n_layer,
                                      n_head=4, bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))


def bert():
    from transformers import BertConfig, BertForMaskedLM
    return BertForMaskedLM(BertConfig(vocab_size=V, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                                      intermediate_size=1024, max_position_embeddings=256,
                                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))


def distilbert():
    from transformers import DistilBertConfig, DistilBertForMaskedLM
    return DistilBertForMaskedLM(DistilBertConfig(vocab_size=V, dim=256, n_layers=4, n_heads=4, hidden_dim=1024,
                                                  max_position_embeddings=256, dropout=0.0, attention_dropout=0.0))


def t5():
    from transformers import T5Config, T5ForConditionalGeneration
    return T5ForConditionalGeneration(T5Config(vocab_size=V, d_model=128, d_kv=32, d_ff=512, num_layers=2,
                                               num_decoder_layers=2, num_heads=4, dropout_rate=0.0,
                                               decoder_start_token_id=0, pad_token_id=0))


def vit():
    from transformers import ViTConfig, ViTForImageClassification
    return ViTForImageClassification(ViTConfig(image_size=32, patch_size=4, hidden_size=192, num_hidden_layers=4,
                                               num_attention_heads=3, intermediate_size=768, num_labels=10,
                                               hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))


def llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    return LlamaForCausalLM(LlamaConfig(vocab_size=V, hidden_size=256, intermediate_size=704, num_hidden_layers=4,
                                        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512))


def resnet18():
    import torchvision
    return torchvision.models.resnet18(num_classes=10)


def first(o):
    return o[0] if isinstance(o, (tuple, list)) else o


# ---------------------------------------------------------------- leaks
def job_hook_append(steps, out):
    """L1: a forward hook on GPT-2's block 1 appends the block's output, not detached."""
    model = gpt2(); model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    feats = []
    model.transformer.h[1].register_forward_hook(lambda m, i, o: feats.append(first(o)))  # the bug
    B, T = 8, 128
    with memdiag.record(model, opt, output=out, name="hook_append"):
        for s in range(steps):
            ids = torch.randint(0, V, (B, T))
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)


def job_hook_pileup(steps, out):
    """L2: a new forward hook registered every step on BERT's last layer; each appends a detached copy."""
    model = bert(); model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    store = []
    B, T = 8, 128
    with memdiag.record(model, opt, output=out, name="hook_pileup"):
        for s in range(steps):
            model.bert.encoder.layer[-1].register_forward_hook(  # the bug: one more hook each step
                lambda m, i, o: store.append(first(o).detach().clone()))
            ids = torch.randint(0, V, (B, T))
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)


def job_create_graph(steps, out):
    """L3: ResNet-18 gradient penalty; the input gradient made with create_graph=True is kept every step."""
    model = resnet18(); model.train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    penalties = []
    B = 8
    with memdiag.record(model, opt, output=out, name="create_graph"):
        for s in range(steps):
            x = torch.randn(B, 3, 64, 64, requires_grad=True)
            y = torch.randint(0, 10, (B,))
            loss = F.cross_entropy(model(x), y)
            g, = torch.autograd.grad(loss, x, create_graph=True)
            penalties.append(g)  # the bug: g carries the double-backward graph
            (loss + 0.1 * g.pow(2).sum()).backward()
            opt.step(); opt.zero_grad(set_to_none=True)


def job_param_groups(steps, out):
    """L4: ViT; every step a new 1 MiB parameter is made and added to AdamW with add_param_group."""
    model = vit(); model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    extra = []
    B = 32
    with memdiag.record(model, opt, output=out, name="param_groups"):
        for s in range(steps):
            p = nn.Parameter(torch.zeros(1024, 256))  # 1 MiB fp32
            opt.add_param_group({"params": [p]})     # the bug: one more group (and its state) each step
            extra.append(p)
            x = torch.randn(B, 3, 32, 32); y = torch.randint(0, 10, (B,))
            loss = F.cross_entropy(model(pixel_values=x).logits, y) + 1e-3 * p.pow(2).mean()
            loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)


def job_grad_clones(steps, out):
    """L5: DistilBERT; 'accumulation' kept as a list of every step's p.grad.clone(), never reduced."""
    model = distilbert(); model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    grad_log = []
    B, T = 8, 64
    with memdiag.record(model, opt, output=out, name="grad_clones"):
        for s in range(steps):
            ids = torch.randint(0, V, (B, T))
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            grad_log.append([p.grad.clone() for p in model.parameters() if p.grad is not None])  # the bug
            opt.step(); opt.zero_grad(set_to_none=True)


class MetricLogger:
    """A logger that keeps what it is given, on the device, keyed by step."""
    def __init__(self):
        self.rows = {}
    def log(self, step, **tensors):
        self.rows[step] = {k: v.detach() for k, v in tensors.items()}


def job_logger_dict(steps, out):
    """L6: T5; a logger object keeps each step's detached logits in a dict keyed by step."""
    model = t5(); model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    logger = MetricLogger()
    B, S, T = 8, 64, 32
    with memdiag.record(model, opt, output=out, name="logger_dict"):
        for s in range(steps):
            src = torch.randint(1, V, (B, S)); tgt = torch.randint(1, V, (B, T))
            o = model(input_ids=src, labels=tgt)
            logger.log(s, logits=o.logits, loss=o.loss)  # the bug: every step's logits stay
            o.loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- controls
def job_late_buffer(steps, out):
    """C1: GPT-2; a 16 MiB table is allocated once, at step 3, and kept (a lazy warm-up). Bounded."""
    model = gpt2(); model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    table = None
    B, T = 8, 128
    with memdiag.record(model, opt, output=out, name="late_buffer"):
        for s in range(steps):
            if s == 3 and table is None:
                table = torch.zeros(4 * 1024 * 1024)  # 16 MiB fp32, made once
            ids = torch.randint(0, V, (B, T))
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)


def job_cache_fills3(steps, out):
    """C2: BERT; a cache of detached logits that fills for steps 0-2 and then stops growing. Bounded."""
    model = bert(); model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    cache = {}
    B, T = 8, 128
    with memdiag.record(model, opt, output=out, name="cache_fills3"):
        for s in range(steps):
            ids = torch.randint(0, V, (B, T))
            o = model(input_ids=ids, labels=ids)
            if len(cache) < 3:
                cache[s] = o.logits.detach()  # 7.8 MiB each, three of them, then no more
            o.loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)


def job_curriculum(steps, out):
    """C3: Llama; sequence length grows every step (curriculum); the loop holds its last output. Bounded per step."""
    model = llama(); model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    B = 8
    with memdiag.record(model, opt, output=out, name="curriculum"):
        for s in range(steps):
            T = 32 + 16 * s
            ids = torch.randint(0, V, (B, T))
            o = model(input_ids=ids, labels=ids)
            o.loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)


def job_unfreeze3(steps, out):
    """C4: ResNet-18; backbone frozen for steps 0-2, unfrozen at step 3: Adam state appears late. Bounded."""
    model = resnet18(); model.train()
    for n, p in model.named_parameters():
        p.requires_grad_(n.startswith("fc."))
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    B = 8
    with memdiag.record(model, opt, output=out, name="unfreeze3"):
        for s in range(steps):
            if s == 3:
                for p in model.parameters():
                    p.requires_grad_(True)
            x = torch.randn(B, 3, 64, 64); y = torch.randint(0, 10, (B,))
            loss = F.cross_entropy(model(x), y)
            loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)


# ---------------------------------------------------------------- checks (not among the ten)
def job_create_graph_detached(steps, out):
    """check for L3: the same loop keeping g.detach() instead of g (does detach() help?)."""
    model = resnet18(); model.train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    penalties = []
    B = 8
    with memdiag.record(model, opt, output=out, name="create_graph_detached"):
        for s in range(steps):
            x = torch.randn(B, 3, 64, 64, requires_grad=True)
            y = torch.randint(0, 10, (B,))
            loss = F.cross_entropy(model(x), y)
            g, = torch.autograd.grad(loss, x, create_graph=True)
            penalties.append(g.detach())  # the only change from create_graph
            (loss + 0.1 * g.pow(2).sum()).backward()
            opt.step(); opt.zero_grad(set_to_none=True)


JOBS = {k[4:]: v for k, v in globals().items() if k.startswith("job_")}

if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--job", required=True, choices=sorted(JOBS))
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("-o", "--output", required=True)
    ap.add_argument("--sizes", action="store_true", help="print parameter counts only")
    a = ap.parse_args()
    JOBS[a.job](a.steps, a.output)
