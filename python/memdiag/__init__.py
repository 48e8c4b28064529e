"""memdiag for Python: records a PyTorch training loop's memory by phase
into memdiag's report format, for `compare_memory_reports` to diagnose.

    import memdiag
    with memdiag.record(model, optimizer, output="run.json"):
        ...your training loop, unchanged...

then `compare_memory_reports run.json`. See README.md in this folder.
"""
__version__ = "0.2.0"

from ._probe import limit_memory  # noqa: E402
from ._recorder import Recorder, record  # noqa: E402
from ._warmup import warm_up  # noqa: E402

__all__ = ["Recorder", "record", "limit_memory", "warm_up", "__version__"]
