import json, sys
r = json.load(open(sys.argv[1]))
ph = sys.argv[2].split(",") if len(sys.argv) > 2 else None
print(r["config"].get("batch_size_per_device"), r.get("model", {}))
for s in r["samples"]:
    if ph and s["phase"] not in ph: continue
    t = s.get("tensors") or {}
    print(s["step"], s.get("micro_batch", ""), s["phase"], "alloc", round(s["allocated_mib"], 2), "peak", round(s.get("peak_allocated_mib") or 0, 2),
          "P", round(t.get("parameters_mib", 0), 2), "G", round(t.get("gradients_mib", 0), 2), "S", round(t.get("optimizer_state_mib", 0), 2),
          {k: v for k, v in s.items() if k in ("samples", "tokens", "input_mib", "loss")})
for e in r["events"]:
    if e["kind"] != "modules": print("EVENT", e["kind"], e.get("phase"), e.get("step"), e["message"][:600])
