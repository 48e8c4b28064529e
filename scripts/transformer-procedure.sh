#!/usr/bin/env bash
# The transformer measured (CUDA): delta's medium preset at several sequence
# lengths (one sweep, --sequence-length), each with the spelt-out (math) attention, the fused
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
mkdir -p "$dir/reports"
csv="$(IFS=,; echo "${lengths[*]}")"
say "delta medium at sequence lengths $csv"
"$bin/memory_diagnostics" -q --case delta --preset medium --sequence-length "$csv" \
  --remedy none,efficient-attention,checkpoint,checkpoint+efficient-attention \
  --output "$dir/reports/delta-seq{seq}-{remedy}.json" || die "delta: the sweep failed"
python3 "$MEMDIAG_ROOT/scripts/crosscheck-transformer.py" "$dir/reports" | tee "$dir/crosscheck.txt"
