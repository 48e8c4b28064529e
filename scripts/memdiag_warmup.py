"""The warm-up memory_diagnostics does before its first sample, for the Python
cross-checks (scripts/crosscheck-*.py): the same function the Python recorder
(python/memdiag) runs, so that both sides' figures carry the same workspaces."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from memdiag._warmup import warm_up  # noqa: E402,F401
