"""memdiag for Python: records a PyTorch training loop's memory by phase
into memdiag's report format, for `compare_memory_reports` to diagnose.

    import memdiag
    with memdiag.record(model, optimizer, output="run.json"):
        ...your training loop, unchanged...

then `compare_memory_reports run.json`. See README.md in this folder.
"""
def _version():
    # One source: the repository's VERSION file beside a source checkout,
    # else the installed wheel's metadata (made from that file).
    import os
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "VERSION")
    if os.path.isfile(here):
        with open(here) as f:
            return f.read().strip()
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("memdiag")
    except PackageNotFoundError:
        return "unknown"


__version__ = _version()

from ._probe import limit_memory  # noqa: E402
from ._recorder import Recorder, record  # noqa: E402
from ._warmup import warm_up  # noqa: E402

__all__ = ["Recorder", "record", "limit_memory", "warm_up", "__version__"]
