"""J12b: no launcher; output= an existing directory."""
import os, sys, time
import torch
sys.path.insert(0, os.path.dirname(__file__))
import common, memdiag

out = sys.argv[1]
os.makedirs("r/j12b-dir", exist_ok=True)
model = common.gpt2()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
t0 = time.time()
try:
    rec = memdiag.record(model, opt, output=out, name="j12b-outdir")
    print("record() accepted output", repr(out), flush=True)
    with rec:
        for step in range(3):
            x = common.ids(8, seed=step)
            out_ = model(input_ids=x, labels=x)
            out_.loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        print(f"loop finished after {time.time()-t0:.1f}s", flush=True)
except Exception as e:
    print(f"after {time.time()-t0:.1f}s: {type(e).__name__}: {e}", flush=True)
print("r/j12b-dir now holds:", sorted(os.listdir("r/j12b-dir")), flush=True)
