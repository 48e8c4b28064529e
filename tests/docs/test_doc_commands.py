"""The doc-command checker itself, on documents of the test's own: it must
fail a block whose command fails, a command exiting with a code its tag
does not allow, a flag the tools do not have, an inline command that fails,
and a skip without a reason; leave templates unrun; and pass what is right. Run by ctest (DocCommands.TheCheckerFailsWhatIsWrong).

    python3 tests/docs/test_doc_commands.py BUILD_DIR
"""
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.path.abspath(sys.argv.pop(1)) if len(sys.argv) > 1 else os.path.join(ROOT, "build")


def check(doc_text):
    d = tempfile.mkdtemp()
    # A root of the test's own: the document, and the folders blocks use.
    os.makedirs(os.path.join(d, "tests", "fixtures"))
    os.makedirs(os.path.join(d, "tests", "cases"))
    with open(os.path.join(d, "DOC.md"), "w") as f:
        f.write(doc_text)
    p = subprocess.run([sys.executable, os.path.join(HERE, "doc_commands.py"), "--root", d, "--build", BUILD,
                        "--mode", "cpu", "DOC.md"], capture_output=True, text=True, timeout=300)
    return p.returncode, p.stdout + p.stderr


class Checker(unittest.TestCase):
    def test_a_block_that_runs_passes(self):
        rc, out = check("```sh\nbuild/bin/memory_diagnostics --list-cases\n```\n")
        self.assertEqual(rc, 0, out)

    def test_a_failing_command_fails_even_before_the_last_line(self):
        rc, out = check("```sh\nbuild/bin/memory_diagnostics --no-such-flag\necho fine\n```\n")
        self.assertEqual(rc, 1, out)
        self.assertIn("DOC.md:1", out)

    def test_an_exit_code_the_tag_allows_passes_and_another_fails(self):
        allowed = "<!-- doc-test: cpu; exit 3 -->\n```sh\nexit 3\n```\n"
        self.assertEqual(check(allowed)[0], 0)
        rc, out = check("<!-- doc-test: cpu; exit 3 -->\n```sh\nfalse\n```\n")
        self.assertEqual(rc, 1, out)

    def test_a_flag_the_tools_do_not_have_fails(self):
        rc, out = check("Run `memory_diagnostics --case alpha --batch-size 4`.\n\n```sh\ntrue\n```\n")
        self.assertEqual(rc, 1, out)
        self.assertIn("--batch-size", out)
        rc, out = check("The flag `--no-such-thing` does it.\n\n```sh\ntrue\n```\n")
        self.assertEqual(rc, 1, out)

    def test_inline_commands_run_in_order_and_a_failing_one_fails(self):
        ok = ("Run `memory_diagnostics --case alpha --device cpu --steps 1 -q -o a.json`, then "
              "`compare_memory_reports a.json`.\n\n```sh\ntrue\n```\n")
        rc, out = check(ok)
        self.assertEqual(rc, 0, out)
        self.assertIn("2 inline commands run, 0 failed", out)
        rc, out = check("Then `compare_memory_reports . --format nonsense` prints it.\n\n```sh\ntrue\n```\n")
        self.assertEqual(rc, 1, out)
        self.assertIn("1 inline commands run, 1 failed", out)

    def test_inline_templates_and_a_readers_own_files_are_examples_not_run(self):
        rc, out = check("`compare_memory_reports DIR --budget-mib N`, `compare_memory_reports mine.json`, "
                        "`compare_memory_reports -o`.\n\n```sh\ntrue\n```\n")
        self.assertEqual(rc, 0, out)
        self.assertIn("0 inline commands run, 0 failed; 3 examples not run", out)

    def test_inline_script_commands_run_on_the_cpu_and_the_rest_are_listed(self):
        rc, out = check("Check with `python3 -c 'print(42)'`; `scripts/run.sh` is the main job, "
                        "`scripts/fuzz.sh SECONDS` fuzzes, `scripts/bench-sweep.sh batches` times the H200, "
                        "`scripts/test.sh --all` is the whole suite.\n\n"
                        "```sh\ntrue\n```\n")
        self.assertEqual(rc, 0, out)
        # The suite's own command with its flags is not run (inside the
        # suite it would start the suite again).
        self.assertIn("1 inline commands run, 0 failed; 4 examples not run", out)
        self.assertIn("the suite's own command", out)
        self.assertIn("a procedure for a CUDA device", out)
        rc, out = check("Then `python3 -c 'import sys; sys.exit(3)'` says no.\n\n```sh\ntrue\n```\n")
        self.assertEqual(rc, 1, out)
        self.assertIn("1 inline commands run, 1 failed", out)

    def test_a_skip_must_say_why(self):
        rc, out = check("<!-- doc-test: skip -->\n```sh\ntrue\n```\n")
        self.assertNotEqual(rc, 0, out)
        self.assertIn("says why", out)


if __name__ == "__main__":
    unittest.main()
