"""Model builders shared by sizes.py and jobs.py (random weights from configs)."""
import torch

def gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel
    c = GPT2Config(vocab_size=8192, n_positions=256, n_embd=256, n_layer=6, n_head=4,
                   resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                   bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(c)

def bert():
    from transformers import BertConfig, BertForSequenceClassification
    c = BertConfig(vocab_size=30522, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                   intermediate_size=1024, max_position_embeddings=256, num_labels=4,
                   hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return BertForSequenceClassification(c)

def resnet18():
    import torchvision
    return torchvision.models.resnet18(num_classes=10)

def llama():
    from transformers import LlamaConfig, LlamaForCausalLM
    c = LlamaConfig(vocab_size=16384, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                    num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256)
    return LlamaForCausalLM(c)

def vit():
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=64, patch_size=8, num_layers=6, num_heads=4,
                             hidden_dim=256, mlp_dim=1024, num_classes=10)

BUILDERS = dict(gpt2=gpt2, bert=bert, resnet18=resnet18, llama=llama, vit=vit)
