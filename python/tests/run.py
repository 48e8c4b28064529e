"""Runs Python recorder tests for ctest (modules, classes or tests by name): exit 0 when its
tests pass, 1 when one fails, 77 (ctest's skip) when every test skipped, with
the reasons printed."""
import os
import sys
import unittest

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
suite = unittest.defaultTestLoader.loadTestsFromNames(sys.argv[1:])
result = unittest.TextTestRunner(verbosity=2).run(suite)
if not result.wasSuccessful():
    sys.exit(1)
if result.testsRun and len(result.skipped) == result.testsRun:
    print("every test skipped:", "; ".join(sorted({reason for _, reason in result.skipped})))
    sys.exit(77)
sys.exit(0)
