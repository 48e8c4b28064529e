#!/usr/bin/env python3
"""Runs the shell blocks of README.md and SOLUTION.md as written.

    doc_commands.py --root SRC --build BUILD --mode cpu|gpu DOC.md...

Every fenced block marked sh, bash, shell or console is a command a reader
may paste. A block runs in a directory of its document's own, in the order
the document gives them (a later block may read what an earlier one wrote,
as a reader following along would), with this Python's bin/ (torch,
torchrun) on PATH and not the build's, in a directory that holds the
repository's folders (links) and copies of tests/fixtures and tests/cases (a
block may write there). Each command must exit 0, or with a code the block's
tag allows. A tag is an HTML comment on the line before the block:

    <!-- doc-test: cpu -->                      (the default for an untagged block)
    <!-- doc-test: gpu -->                      (run only by the gpu label, on CUDA)
    <!-- doc-test: cpu; exit 1,3 -->            (those exit codes are the point shown)
    <!-- doc-test: cpu; given run.json=tests/fixtures/cpu/alpha.json -->
    <!-- doc-test: skip; why it cannot run here -->

`given` copies a repository file or folder into the directory first, for a
block that reads a file the reader is assumed to have. A skip must say why.
In cpu mode it also checks that every --flag the documents give
memory_diagnostics or compare_memory_reports, in blocks and inline code, is
one the tool's --help lists, and runs the inline commands of the two tools
(`compare_memory_reports tests/fixtures/h200` in a sentence), after the
document's blocks, in the same directory, with build/bin/ on PATH (a bare
name is the installed tool): each must exit 0. An inline command with a
placeholder (DIR, N, CASE.json, ..., [flags]), one without the input the
tool needs (`compare_memory_reports -o`), or one naming an input neither the
repository nor an earlier command made (`compare_memory_reports run.json`,
a reader's own) is an example, not run; each is listed.

The inline commands of the scripts (`scripts/bench-compare.sh 1000`,
`python3 -c ...`) run the same way where they run on the CPU (no device
named, or `--device cpu`); the others are listed with why they are not run
here: a template, the script's bare name, the suite's own commands (the
README's two, run by CI and scripts/first-hour.sh), a script that rewrites
the documents, or a procedure for a CUDA device, which the gpu mode runs.

Exit 0: every block of the mode ran as written; 1: one did not (its place,
command, exit code and output are printed); 77: nothing to run in this mode
(no CUDA for gpu).
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

FENCE = re.compile(r"^```(sh|bash|shell|console)\s*$")
TAG = re.compile(r"^<!--\s*doc-test:\s*(.*?)\s*-->\s*$")


class Block:
    def __init__(self, doc, line, text, tag):
        self.doc, self.line, self.text = doc, line, text
        self.mode, self.exits, self.given, self.why = "cpu", {0}, [], ""
        if tag is None:
            return
        parts = [p.strip() for p in tag.split(";")]
        self.mode = parts[0]
        if self.mode not in ("cpu", "gpu", "skip"):
            raise ValueError(f"{doc}:{line}: doc-test mode {self.mode!r}: cpu, gpu or skip")
        for p in parts[1:]:
            if p.startswith("exit "):
                self.exits |= {int(x) for x in p[5:].split(",")}
            elif p.startswith("given "):
                for pair in p[6:].split(","):
                    dest, _, src = pair.strip().partition("=")
                    if not dest or not src:
                        raise ValueError(f"{doc}:{line}: given {pair!r}: DEST=SRC")
                    self.given.append((dest, src))
            elif self.mode == "skip":
                self.why = p
            else:
                raise ValueError(f"{doc}:{line}: doc-test part {p!r}: exit N,M or given DEST=SRC")
        if self.mode == "skip" and not self.why:
            raise ValueError(f"{doc}:{line}: a skipped block says why (<!-- doc-test: skip; why -->)")

    def where(self):
        return f"{self.doc}:{self.line}"


def blocks_of(path, name):
    out, lines = [], open(path).read().splitlines()
    i = 0
    while i < len(lines):
        if FENCE.match(lines[i]):
            start = i
            j = i + 1
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            k = start - 1
            while k >= 0 and not lines[k].strip():
                k -= 1
            m = TAG.match(lines[k]) if k >= 0 else None
            out.append(Block(name, start + 1, "\n".join(lines[start + 1:j]), m.group(1) if m else None))
            i = j + 1
        else:
            i += 1
    return out


TOOL_CALL = re.compile(r"(?:^|[\s`/(])(memory_diagnostics|compare_memory_reports)((?:[ \t]+(?:\\\n[ \t]*)?[^\s`|;&)]+)*)")


def flag_mismatches(path, name, build):
    """Every --flag the document gives memory_diagnostics or
    compare_memory_reports, in code blocks and inline code, is one the
    tool's --help lists (a renamed or removed flag in the prose fails)."""
    helps = {}
    for tool in ("memory_diagnostics", "compare_memory_reports"):
        exe = os.path.join(build, "bin", tool)
        out = subprocess.run([exe, "--help"], capture_output=True, text=True).stdout
        helps[tool] = set(re.findall(r"--[a-z][a-z0-9-]*", out))
    text = open(path).read()
    code = re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S) + re.findall(r"`([^`\n]+)`", text)
    bad = []
    for span in code:
        for m in TOOL_CALL.finditer(span):
            tool, args = m.group(1), m.group(2)
            for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", args):
                if flag not in helps[tool]:
                    bad.append(f"{name}: {tool} {flag} (in `{span.strip()[:80]}`) is not in its --help")
    # A flag on its own in the prose or a flag table (`--isolate`): one of
    # the two tools has it.
    either = helps["memory_diagnostics"] | helps["compare_memory_reports"]
    for span in re.findall(r"`(--[a-z][^`\n]*)`", text):
        flag = re.match(r"--[a-z][a-z0-9-]*", span).group(0)
        if flag not in either:
            bad.append(f"{name}: {flag} (in `{span[:80]}`) is in neither tool's --help")
    return sorted(set(bad))


INLINE_TOOL = re.compile(r"^(?:build/bin/)?(memory_diagnostics|compare_memory_reports)(?:\s|$)")
PLACEHOLDER = re.compile(r"(?<![\w./-])[A-Z][A-Z0-9_]*(?:\.json)?(?![\w-])|\.\.\.|[|\[\]<>]")


def inline_commands(path):
    """The inline code spans of the prose (outside fenced blocks) that call
    one of the two tools, in document order."""
    text = re.sub(r"```.*?```", "", open(path).read(), flags=re.S)
    spans = [s.strip() for s in re.findall(r"`([^`\n]+)`", text)]
    # A tool's name alone names it; it is no command.
    return [s for s in spans if INLINE_TOOL.match(s) and len(s.split()) > 1]


SCRIPT_CALL = re.compile(r"^(?:[A-Z_]+=\S+\s+)*(?:python3\s+(?:-c\s|(?:\./)?(?:scripts|python)/)|(?:\./)?scripts/)")
# (with their own flags: `scripts/test.sh --all` is the suite itself, run
# inside it it would start itself again.)
SUITE_OWN = re.compile(r"^(?:[A-Z_]+=\S+\s+)*scripts/(?:run|test|setup|build)\.sh(?:\s+--[a-z-]+)*$")
CUDA_PROCEDURE = "a procedure for a CUDA device"
# Scripts whose work is a CUDA device's unless told --device cpu.
NEEDS_CUDA = ("reference-procedure.sh", "bench-sweep.sh", "library_model.py", "crosscheck-", "recorder-overhead.py",
              "sharding-procedure.sh", "oom-procedure.sh", "fragmentation-procedure.sh", "transformer-procedure.sh",
              "sequence-capacity-check.sh")


def script_commands(path):
    """The inline code spans of the prose that call one of the repository's
    scripts (or python3 -c), in document order."""
    text = re.sub(r"```.*?```", "", open(path).read(), flags=re.S)
    spans = [s.strip() for s in re.findall(r"`([^`\n]+)`", text)]
    return [s for s in spans if SCRIPT_CALL.match(s)]


def script_kind(cmd):
    """"run", or why the command is not run by this check."""
    words = cmd.split()
    if SUITE_OWN.match(cmd):
        return "the suite's own command (the README's, run by CI and scripts/first-hour.sh)"
    if PLACEHOLDER.search(cmd):
        return "a template (placeholders)"
    if "update-solution.sh" in cmd:
        return "rewrites the documents (Fixtures.* check what it writes)"
    if len([w for w in words if "=" not in w or w.startswith("-")]) == 1 or (words[0] == "python3" and len(words) == 2):
        return "the script's name"
    if any(n in cmd for n in NEEDS_CUDA) and "--device cpu" not in cmd:
        return CUDA_PROCEDURE
    return "run"


def inline_kind(cmd, d):
    """"run", or why it is an example."""
    if PLACEHOLDER.search(cmd):
        return "a template (placeholders)"
    words = cmd.split()
    tool = INLINE_TOOL.match(cmd).group(1)
    if tool == "memory_diagnostics":
        if not any(w in ("--case", "--plan") for w in words):
            return "a fragment (no --case or --plan)"
        return "run"
    # The comparer's inputs: its words that are not flags or their values.
    takes_value = {"-o", "--output", "--format", "--budget-mib", "--world-size", "--expect", "--fail-on",
                   "--baseline", "--max-increase", "--max-increase-mib"}
    inputs, skip = [], False
    for w in words[1:]:
        if skip:
            skip = False
        elif w in takes_value:
            skip = True
        elif not w.startswith("-"):
            inputs.append(w)
    if not inputs:
        return "a fragment (no report to read)"
    missing = [w for w in inputs if not os.path.exists(os.path.join(d, w))]
    if missing:
        return f"an example (names {missing[0]}, which neither the repository nor an earlier command makes)"
    return "run"


def run_inline(cmd, d, env, build, timeout):
    e = dict(env)
    e["PATH"] = os.pathsep.join([os.path.join(build, "bin"), env["PATH"]])
    t = time.monotonic()
    try:
        p = subprocess.run(["bash", "-c", cmd], cwd=d, env=e, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout} s", time.monotonic() - t
    return p.returncode == 0, (p.stdout[-2000:] + p.stderr[-2000:]), time.monotonic() - t


def workdir(root, build):
    d = tempfile.mkdtemp(prefix="memdiag-doc-")
    for entry in os.listdir(root):
        if entry in (".git", "tests", "build", "reports") or entry.startswith("build-"):
            continue
        os.symlink(os.path.join(root, entry), os.path.join(d, entry))
    os.symlink(build, os.path.join(d, "build"))
    for sub in ("fixtures", "cases"):
        shutil.copytree(os.path.join(root, "tests", sub), os.path.join(d, "tests", sub), symlinks=True)
    return d


def cache_value(build, key):
    try:
        for line in open(os.path.join(build, "CMakeCache.txt")):
            if line.startswith(key + ":"):
                return line.strip().split("=", 1)[1]
    except OSError:
        pass
    return None


def run_block(b, d, env, timeout):
    for dest, src in b.given:
        target = os.path.join(d, dest)
        os.makedirs(os.path.dirname(target) or d, exist_ok=True)
        source = os.path.join(env["MEMDIAG_DOC_ROOT"], src)
        if os.path.isdir(source):
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copyfile(source, target)
    allowed = ",".join(str(x) for x in sorted(b.exits))
    # Each command's exit is checked where it happens (a reader sees each
    # one), not only the block's last.
    script = ("set -o pipefail\n"
              f"trap 'rc=$?; case \",{allowed},\" in *\",$rc,\"*) ;; *) "
              "echo \"doc-test: $BASH_COMMAND exited $rc\" >&2; exit 99;; esac' ERR\n" + b.text + "\n")
    t = time.monotonic()
    try:
        p = subprocess.run(["bash", "-c", script], cwd=d, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout} s", time.monotonic() - t
    ok = p.returncode == 0 or (p.returncode in b.exits and "doc-test:" not in p.stderr)
    return ok, (p.stdout[-3000:] + p.stderr[-3000:]), time.monotonic() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--mode", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--timeout", type=int, default=600, help="seconds a block may take (default 600)")
    ap.add_argument("docs", nargs="+")
    args = ap.parse_args()
    root, build = os.path.abspath(args.root), os.path.abspath(args.build)
    if args.mode == "gpu":
        try:
            import torch
            if not torch.cuda.is_available():
                print("doc commands (gpu): no CUDA device here; the gpu blocks need one")
                return 77
        except ImportError:
            print("doc commands (gpu): no torch in this Python to ask for CUDA")
            return 77
    env = dict(os.environ)
    # Not the build's bin/: a block names build/bin/ or puts it on PATH
    # itself, as a reader must. This Python's bin/ (torch's torchrun and a
    # python3 that imports torch) is what scripts/setup.sh made.
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env["MEMDIAG_DOC_ROOT"] = root
    # scripts/build.sh in a block must find the build configured as it is,
    # not configure it again under the tests' feet.
    for key in ("MEMDIAG_WARNINGS_AS_ERRORS", "MEMDIAG_WITH_TORCH"):
        v = cache_value(build, key)
        if v is not None:
            env[key] = v
    env.pop("MEMDIAG_REPORTS", None)
    failed, ran, skipped = [], 0, []
    inline_ran, inline_failed, examples = 0, [], []
    flags_bad = []
    if args.mode == "cpu":
        for doc in args.docs:
            flags_bad += flag_mismatches(os.path.join(root, doc), os.path.basename(doc), build)
        for b in flags_bad:
            print(f"FAIL {b}")
    for doc in args.docs:
        name = os.path.basename(doc)
        d = workdir(root, build)
        try:
            for b in blocks_of(os.path.join(root, doc), name):
                if b.mode != args.mode:
                    if b.mode == "skip":
                        skipped.append(f"{b.where()}: {b.why}")
                    continue
                ok, output, secs = run_block(b, d, env, args.timeout)
                ran += 1
                print(f"{'ok  ' if ok else 'FAIL'} {b.where():16s} {secs:6.1f} s  {b.text.splitlines()[0][:90]}")
                if not ok:
                    failed.append(b)
                    print("     " + output.replace("\n", "\n     "))
            path = os.path.join(root, doc)
            if args.mode == "cpu":
                # The tools' inline commands, then the scripts': each is run,
                # or listed with why not. Judged when its turn comes: an
                # earlier command may make the input a later one reads.
                listed = [(c, lambda c: inline_kind(c, d)) for c in inline_commands(path)]
                listed += [(c, script_kind) for c in dict.fromkeys(script_commands(path))]
            else:
                # The scripts' procedures for a CUDA device, which the cpu
                # mode lists, run as written; nothing else (None: not this
                # mode's to list either).
                listed = [(c, lambda c: "run" if script_kind(c) == CUDA_PROCEDURE else None)
                          for c in dict.fromkeys(script_commands(path))]
            for cmd, kind_of in listed:
                kind = kind_of(cmd)
                if kind is None:
                    continue
                if kind != "run":
                    examples.append(f"{name}: `{cmd}`: {kind}")
                    continue
                ok, output, secs = run_inline(cmd, d, env, build, args.timeout)
                inline_ran += 1
                print(f"{'ok  ' if ok else 'FAIL'} {name + ' inline':16s} {secs:6.1f} s  {cmd[:90]}")
                if not ok:
                    inline_failed.append(f"{name}: `{cmd}`")
                    print("     " + output.replace("\n", "\n     "))
        finally:
            shutil.rmtree(d, ignore_errors=True)
    for s in skipped if args.mode == "cpu" else []:
        print(f"skip {s}")
    for x in examples:
        print(f"example {x}")
    print(f"{ran} blocks run ({args.mode}), {len(failed)} failed" +
          (f": {', '.join(b.where() for b in failed)}" if failed else ""))
    print(f"{inline_ran} inline commands run, {len(inline_failed)} failed" +
          (f": {', '.join(inline_failed)}" if inline_failed else "") + f"; {len(examples)} examples not run")
    if ran == 0 and inline_ran == 0 and not flags_bad:
        return 77
    return 1 if failed or flags_bad or inline_failed else 0


if __name__ == "__main__":
    sys.exit(main())
