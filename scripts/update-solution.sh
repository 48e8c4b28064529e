#!/usr/bin/env bash
# Rewrites the generated blocks of SOLUTION.md from the committed reports:
# between "<!-- compare:NAME begin -->" and "<!-- compare:NAME end -->" goes
# exactly what `compare_memory_reports tests/fixtures/NAME --format markdown`
# prints. A test (Fixtures.SolutionMdShowsWhatCompareReportsPrint) fails when
# the document and the tool disagree.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cmp="$MEMDIAG_BUILD_DIR/bin/compare_memory_reports"
[ -x "$cmp" ] || die "no $cmp: run scripts/build.sh first"
doc="$MEMDIAG_ROOT/SOLUTION.md"
cd "$MEMDIAG_ROOT"
for dir in tests/fixtures/*/; do
  name="$(basename "$dir")"
  # A relative path, as the test runs it: suggested outputs do not depend on
  # where the checkout is.
  block="$("$cmp" "tests/fixtures/$name" --format markdown)"
  python3 - "$doc" "$name" "$block" <<'PY'
import sys
path, name, block = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(path).read()
begin, end = f"<!-- compare:{name} begin -->\n", f"<!-- compare:{name} end -->"
b, e = text.find(begin), text.find(end)
if b < 0 or e < b:
    sys.exit(f"SOLUTION.md has no block for {name}")
text = text[: b + len(begin)] + block + "\n" + text[e:]
open(path, "w").write(text)
PY
  say "SOLUTION.md: block $name updated"
done
