"""A recording still open when the interpreter exits (start() without
finish(): an uncaught exception outside a `with`, a generator never run to
its end) is finished then, status failed, so that the report is written
and the CPU probe's profiler is stopped before the interpreter tears
torch down (left running, it ended the process in a segfault)."""
import atexit
import sys

_open = []
_registered = [False]


def add(rec):
    if not _registered[0]:
        atexit.register(_finish_all)
        _registered[0] = True
    _open.append(rec)


def discard(rec):
    if rec in _open:
        _open.remove(rec)


def _finish_all():
    for rec in list(_open):
        try:
            rec.finish("failed", RuntimeError("the process exited while recording (finish() was not called)"))
        except Exception as e:
            print(f"memdiag: no report at exit: {e}", file=sys.stderr)
