#!/usr/bin/env bash
# Per-rank memory under each sharding mode against the formulas (P the
# parameter bytes, N ranks, k the optimizer's state per parameter byte as the
# replicated run measured it: 2 for AdamW, 0 for plain SGD): replicated
# (2+k)P, ZeRO-1 2P + kP/N, ZeRO-2 P + (1+k)P/N, ZeRO-3 (2+k)P/N (fp32
# AdamW: 4P, 2P + 2P/N, P + 3P/N, 4P/N). alpha, beta and gamma at each world
# size, each mode, under torchrun; then a table of rank 0's figures (also
# DIR/sharding.txt; torchrun's own messages in DIR/torchrun.log).
#
#   scripts/sharding-procedure.sh DIR [N...] [-- memory_diagnostics flags]   (default N: 2 4)
#   scripts/sharding-procedure.sh /tmp/s 2 4 -- --device cpu
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
dir="${1:?usage: scripts/sharding-procedure.sh DIR [N...] [-- flags]}"
shift
split_at_dashdash "$@"
worlds=("${specs[@]}")
[ "${#worlds[@]}" -gt 0 ] || worlds=(2 4)
launcher_setup
mkdir -p "$dir"
for n in "${worlds[@]}"; do
  for c in alpha beta gamma; do
    for m in none optimizer gradients parameters; do
      shard=(); [ "$m" = none ] || shard=(--shard="$m")
      say "$c at world $n, shard $m"
      "$runner" --nproc-per-node="$n" --no-python "$bin/memory_diagnostics" -q --case "$c" --steps 4 "${shard[@]}" "${extra[@]}" \
        --output "$dir/$c-n$n-$m-{rank}.json" >>"$dir/torchrun.log" 2>&1 || die "$c at world $n, shard $m: failed (see $dir/torchrun.log)"
    done
  done
done
python3 - "$dir" <<'PY' | tee "$dir/sharding.txt"
import glob, json, os, sys
d = sys.argv[1]
# (replicated, sharded) parts in P, given k
form = {"ddp": lambda k: (2 + k, 0), "zero1": lambda k: (2, k), "zero2": lambda k: (1, 1 + k), "zero3": lambda k: (0, 2 + k)}
print(f"{'case':6} {'N':>2} {'mode':6} {'k':>4} {'P MiB':>8} {'formula':>9} {'measured':>9} {'apart':>7} {'alloc@step':>10} {'extra':>8} {'fwd inc':>8} {'growth/step':>11} {'peak':>8} {'losses = ddp':>12}")
order = {"ddp": 0, "zero1": 1, "zero2": 2, "zero3": 3}
rows = []
for path in glob.glob(os.path.join(d, "*-0.json")):
    r = json.load(open(path))
    name = os.path.basename(path)[:-7]
    case, n, mode = name.split("-")[0], int(name.split("-")[1][1:]), r["config"]["parallelism"]["mode"]
    S = r["samples"]
    P = r["model"]["parameter_bytes"] / 2**20
    base = json.load(open(os.path.join(d, f"{case}-n{n}-none-0.json")))
    k = [s for s in base["samples"] if s["phase"] == "step"][-1]["tensors"]["optimizer_state_mib"] / P
    rep, sh = form[mode](round(k))
    f = rep * P + sh * P / n
    step = [s for s in S if s["phase"] == "step"][-1]
    t = step["tensors"]
    meas = t["parameters_mib"] + t["gradients_mib"] + t["optimizer_state_mib"]
    clean = [s for s in S if s["phase"] == "cleanup"]
    fw = [s for s in S if s["phase"] == "forward"][1]["allocated_mib"] - clean[0]["allocated_mib"]
    growth = (clean[-1]["allocated_mib"] - clean[1]["allocated_mib"]) / (len(clean) - 2)
    lb = [s["loss"] for s in base["samples"] if s["phase"] == "step"]
    la = [s["loss"] for s in S if s["phase"] == "step"]
    same = max(abs(a - b) / abs(b) for a, b in zip(la, lb))
    peak = max(s["peak_allocated_mib"] for s in S)
    rows.append((case, n, order[mode], f"{case:6} {n:>2} {mode:6} {round(k):>4} {P:8.2f} {f:9.2f} {meas:9.2f} {100*(meas-f)/f:+6.2f}% {step['allocated_mib']:10.2f} {step['allocated_mib']-f:8.2f} {fw:8.2f} {growth:11.2f} {peak:8.2f} {same:12.1e}"))
for row in sorted(rows):
    print(row[3])
PY
