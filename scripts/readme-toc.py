#!/usr/bin/env python3
"""The README's table of contents, made from its own headings (## and ###,
outside code blocks) and written between its `<!-- toc -->` and
`<!-- toc end -->` lines.

    python3 scripts/readme-toc.py [README.md]           # rewrite it
    python3 scripts/readme-toc.py --check [README.md]   # exit 1 when it is stale (ctest DocToc)
"""
import re
import sys

BEGIN, END = "<!-- toc -->", "<!-- toc end -->"


def anchor(title):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*]", "", title).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def toc(lines):
    out, fenced, seen = [], False, {}
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"^(##|###) (.+)$", line)
        if not m:
            continue
        title = m.group(2).strip()
        a = anchor(title)
        n = seen.get(a, 0)
        seen[a] = n + 1
        if n:
            a = f"{a}-{n}"
        out.append(f"{'  ' if m.group(1) == '###' else ''}- [{title}](#{a})")
    return out


def main(argv):
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    path = args[0] if args else "README.md"
    with open(path) as f:
        text = f.read()
    lines = text.split("\n")
    if BEGIN not in lines or END not in lines:
        sys.exit(f"readme-toc: {path}: no '{BEGIN}' ... '{END}' lines to write between")
    a, b = lines.index(BEGIN), lines.index(END)
    made = lines[:a + 1] + toc(lines[b + 1:]) + lines[b:]
    new = "\n".join(made)
    if check:
        if new != text:
            print(f"readme-toc: {path}: the table of contents is stale: run python3 scripts/readme-toc.py {path}")
            return 1
        print(f"readme-toc: {path}: the table of contents matches its {len(toc(lines[b + 1:]))} headings")
        return 0
    with open(path, "w") as f:
        f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
