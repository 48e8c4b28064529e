#!/usr/bin/env bash
# The transformer measured (CUDA): delta's medium preset at several sequence
# lengths (a case file per length, named delta-sL, derived from
# cases/delta.json), each with the spelt-out (math) attention, the fused
# kernel (efficient-attention), checkpointing by block, and both; then the
# fidelity check against the same model in PyTorch's Python API
# (scripts/crosscheck-transformer.py).
#
#   scripts/transformer-procedure.sh DIR [LENGTH...]   (default 512 1024 2048)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
dir="${1:?usage: scripts/transformer-procedure.sh DIR [LENGTH...]}"
shift
lengths=("$@")
[ "${#lengths[@]}" -gt 0 ] || lengths=(512 1024 2048)
bin="$MEMDIAG_BUILD_DIR/bin"
[ -x "$bin/memory_diagnostics" ] || die "no $bin/memory_diagnostics: run scripts/build.sh first"
mkdir -p "$dir/cases" "$dir/reports"
for l in "${lengths[@]}"; do
  python3 - "$MEMDIAG_ROOT/cases/delta.json" "$dir/cases/delta-s$l.json" "$l" <<'PY'
import json, sys
src, dst, length = sys.argv[1], sys.argv[2], int(sys.argv[3])
case = json.load(open(src))
case["name"] = f"delta-s{length}"
case["description"] = case["description"] + f" Sequence length {length} (scripts/transformer-procedure.sh)."
for p in case["presets"].values():
    p["model"]["sequence_length"] = length
json.dump(case, open(dst, "w"), indent=2)
PY
  say "delta medium at sequence length $l"
  "$bin/memory_diagnostics" -q --case "$dir/cases/delta-s$l.json" --preset medium \
    --remedy none,efficient-attention,checkpoint,checkpoint+efficient-attention \
    --output "$dir/reports/delta-s$l-{remedy}.json" || die "delta-s$l: the sweep failed"
done
python3 "$MEMDIAG_ROOT/scripts/crosscheck-transformer.py" "$dir/reports" | tee "$dir/crosscheck.txt"
