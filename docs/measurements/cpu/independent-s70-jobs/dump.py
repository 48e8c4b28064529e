"""dump.py REPORT: each sample's phase, step, allocated, peak and census; then the event kinds."""
import json, sys
d = json.load(open(sys.argv[1]))
print("config:", {k: d["config"].get(k) for k in ("batch_size", "steps", "batch_seen")})
for s in d["samples"]:
    t = s.get("tensors") or {}
    t = {k: (v or 0) for k, v in t.items()}
    extra = {k: s[k] for k in ("samples", "tokens", "forwards", "micro_batch", "input_mib") if k in s}
    print(f'{s["phase"]:>15} {str(s.get("step")):>4} alloc {s["allocated_mib"]:8.2f} peak {(s["peak_allocated_mib"] or 0):8.2f} '
          f'P {t.get("parameters_mib", 0):7.2f} G {t.get("gradients_mib", 0):7.2f} S {t.get("optimizer_state_mib", 0):7.2f} {extra}')
for e in d.get("events", []):
    print("event:", e.get("kind") or e.get("type"), json.dumps(e)[:300])
