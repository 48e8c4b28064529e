#!/usr/bin/env bash
# Tensor parallelism (--parallel=tensor) beside DDP and ZeRO-3, per rank:
# alpha and beta at their defaults at each world size, one process of each
# for the losses, then the comparer's per-rank table of each (rank 0's
# census at the end of the last step() against the formulas: weights P
# replicated, P/N under ZeRO-3, P - S + S/N under tensor parallelism, S the
# split layers' part; model state (2+k) times those) and each mode's largest
# relative loss difference from the single process's, with the activations
# between a pair's layers the forward no longer keeps. Also DIR/tensor-parallel.txt;
# torchrun's own messages in DIR/torchrun.log.
#
#   scripts/tensor-parallel-procedure.sh DIR [N...] [-- memory_diagnostics flags]   (default N: 2 4)
#   scripts/tensor-parallel-procedure.sh /tmp/tp 2 4 -- --device cpu
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
dir="${1:?usage: scripts/tensor-parallel-procedure.sh DIR [N...] [-- flags]}"
shift
split_at_dashdash "$@"
worlds=("${specs[@]}")
[ "${#worlds[@]}" -gt 0 ] || worlds=(2 4)
launcher_setup
mkdir -p "$dir"
cases=(alpha beta)
for c in "${cases[@]}"; do
  say "$c in one process"
  "$bin/memory_diagnostics" -q --case "$c" "${extra[@]}" --output "$dir/$c-one.json"
  for n in "${worlds[@]}"; do
    mkdir -p "$dir/$c-n$n"
    for m in ddp zero3 tensor; do
      flag=(); [ "$m" = zero3 ] && flag=(--shard=parameters); [ "$m" = tensor ] && flag=(--parallel=tensor)
      say "$c at world $n, $m"
      "$runner" --nproc-per-node="$n" --no-python "$bin/memory_diagnostics" -q --case "$c" "${flag[@]}" "${extra[@]}" \
        --output "$dir/$c-n$n/$m-{rank}.json" >>"$dir/torchrun.log" 2>&1 || die "$c at world $n, $m: failed (see $dir/torchrun.log)"
    done
  done
done
{
  for c in "${cases[@]}"; do
    for n in "${worlds[@]}"; do
      echo "\$ compare_memory_reports $c-n$n/   # ddp, zero3 and tensor at world $n: the per-rank table"
      "$bin/compare_memory_reports" "$dir/$c-n$n" | sed -n '/^per rank under each parallel mode/,/^[^ p]/p' | sed '$d'
    done
  done
  python3 - "$dir" "${cases[@]}" -- "${worlds[@]}" <<'PY'
import glob, json, os, sys
d = sys.argv[1]
cases = sys.argv[2:sys.argv.index("--")]
worlds = [int(n) for n in sys.argv[sys.argv.index("--") + 1:]]
def load(p): return json.load(open(p))
def losses(r): return [s["loss"] for s in r["samples"] if s["phase"] == "step"]
def forward(r):
    s = r["samples"]
    return [x for x in s if x["phase"] == "forward"][1]["allocated_mib"] - [x for x in s if x["phase"] == "cleanup"][0]["allocated_mib"]
print()
print("losses and activations against one process of the same case (every rank; fwd: step 1's forward increment, rank 0)")
print(f"{'case':6} {'N':>2} {'mode':6} {'max |loss - one| / one':>23} {'final weights sum of squares apart':>35} {'fwd MiB':>8} {'one fwd':>8} {'saved':>7}")
for c in cases:
    one = load(os.path.join(d, f"{c}-one.json"))
    lo = losses(one)
    for n in worlds:
        for m in ("ddp", "zero3", "tensor"):
            ranks = [load(p) for p in sorted(glob.glob(os.path.join(d, f"{c}-n{n}", f"{m}-*.json")))]
            worst = max(abs(a - b) / abs(b) for r in ranks for a, b in zip(losses(r), lo))
            sq = max(abs(r["model"]["final_parameter_sum_of_squares"] - one["model"]["final_parameter_sum_of_squares"]) /
                     one["model"]["final_parameter_sum_of_squares"] for r in ranks)
            f, f1 = forward(ranks[0]), forward(one)
            print(f"{c:6} {n:>2} {m:6} {worst:23.1e} {sq:35.1e} {f:8.2f} {f1:8.2f} {f1 - f:7.2f}")
PY
} | tee "$dir/tensor-parallel.txt"
