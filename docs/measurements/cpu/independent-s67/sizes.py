# parameter counts of the models (no recording), for EXPECTED.md's estimates
import sys; sys.argv=[sys.argv[0]]
import jobs
for n, f in [("gpt2", jobs.gpt2), ("bert", jobs.bert), ("distilbert", jobs.distilbert), ("t5", jobs.t5),
             ("vit", jobs.vit), ("llama", jobs.llama), ("resnet18", jobs.resnet18)]:
    m = f(); c = sum(p.numel() for p in m.parameters())
    print(f"{n:10s} {c/1e6:7.3f} M params  {c*4/2**20:7.2f} MiB fp32  tensors={len(list(m.parameters()))}")
m = jobs.resnet18(); c = sum(p.numel() for n,p in m.named_parameters() if not n.startswith('fc.'))
print("resnet18 backbone", c*4/2**20, "MiB")
