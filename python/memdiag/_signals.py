"""SIGTERM and SIGHUP while recording: the report is written as for Ctrl-C.

A scheduler's timeout, a CI cancellation and torchrun stopping its workers
all send SIGTERM; a closed terminal sends SIGHUP. Python's default for both
ends the process at once, with no exception for the recording's block to
see. While a recorder records, its handler takes the signal:

- the loop's own handler, if it had one, runs first; should it raise (a
  graceful shutdown's sys.exit), the block ends with that exception and the
  report says interrupted by the signal; should it return, the job goes on
  and so does the recording;
- otherwise (the default action) the report is written, status
  interrupted, the default action is put back and the signal sent again, so
  the job still ends by it (exit status 128 + the signal's number);
- an ignored signal stays ignored.

A signal that arrives while the report is being written (the loop ended
by an error, and torchrun stops the other ranks at that moment) is held
until the report is written and then delivered again to the handler that
was there before, so the report is not lost to the race.

Handlers can only be set from the main thread: a recording started in
another thread leaves the signals as they are.
"""
import os
import signal
import sys
import threading

SIGNALS = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))

_previous = {}  # signal number -> the handler ours replaced
_recorder = [None]
_held = []  # signals that arrived while the report was being written


def install(rec):
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in SIGNALS:
        prev = signal.getsignal(sig)
        if prev is signal.SIG_IGN or prev is None:  # ignored, or set outside Python: left alone
            continue
        signal.signal(sig, _handle)
        _previous[sig] = prev
    _recorder[0] = rec


def uninstall(rec):
    """Puts the loop's handlers back, then delivers a signal held while the
    report was written: it now meets what would have met it without us."""
    if _recorder[0] is not rec:
        return
    _recorder[0] = None
    if threading.current_thread() is not threading.main_thread():
        return
    for sig, prev in list(_previous.items()):
        if signal.getsignal(sig) is _handle:  # one the loop set since then stays
            signal.signal(sig, prev)
    _previous.clear()
    held = list(dict.fromkeys(_held))
    _held.clear()
    for sig in held:
        os.kill(os.getpid(), sig)


def raised_by_signal(rec, error):
    """Whether `error`, ending the block, came from a signal's handler."""
    return getattr(rec, "_signal", None) is not None and error is not None


def describe(rec, error):
    sig = getattr(rec, "_signal", None)
    if sig is not None:
        return signal.Signals(sig).name
    return type(error).__name__ if error is not None else "signal"


def _handle(signum, frame):
    rec = _recorder[0]
    prev = _previous.get(signum, signal.SIG_DFL)
    if rec is not None and rec._finished:  # the report is being written: held until it is
        _held.append(signum)
        return
    if rec is not None:
        rec._signal = signum
    if callable(prev):
        prev(signum, frame)  # raises: the block's exit writes the report
        if rec is not None:
            rec._signal = None  # it returned: the job goes on
        return
    if rec is not None:
        try:
            rec.finish("interrupted")
        except BaseException as e:  # the signal must still end the job
            print(f"memdiag: no report at {signal.Signals(signum).name}: {e}", file=sys.stderr)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
