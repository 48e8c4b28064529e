"""The recorder's steady lane (native/steady_lane.cpp): a steady step's hooks
without the recorder's Python.

The recorder (memdiag/_recorder.py) decides every step until the loop shows
its steady pattern: one optimizer, no micro-batches, past the steps whose
cleanups are walked and whose forward is read by module (and past the
steps whose hooks are all timed), no sync. At a step's end in that
pattern it hands its state to the lane (maybe_engage), which makes the
same readings and samples from the hooks, in C++. At anything the lane
does not do (a nested or evaluation forward, a skipped step(), a second
forward before backward, a loss backward with retain_graph before the
kept walk saw one), and whenever the recorder's Python must look at the
state (mark(), finish(), an out-of-memory error, the gradient scaler's
step), the lane hands the state back (spill) and the recorder goes on as if
it had made every sample itself: the samples, their order and their
figures are the ones its Python makes (tests/test_recorder.py's lane tests
compare the two on the same readings).

MEMDIAG_NATIVE_LANE=0: no lane (the recorder's Python at every hook).
MEMDIAG_LANE_PROFILE=1: the lane counts where its time goes (profile(rec);
scripts/recorder-lane-profile.py prints it).
"""
import os
import time
import weakref

from . import _census, _inputs

# Phase and state codes: native/steady_lane.cpp's Code.
_NAMES = {0: None, 1: "forward", 2: "backward", 3: "step", 4: "cleanup", 5: "between"}
_CODES = {v: k for k, v in _NAMES.items()}
_ns = time.perf_counter_ns


class Helpers:
    """What the lane asks of the recorder's Python: where a reading is not
    native (NVML, a walk of the inputs), and the hand-back itself. A weak
    reference: the recorder owns the lane."""

    def __init__(self, rec):
        self._rec = weakref.ref(rec)

    def spill(self):
        rec = self._rec()
        if rec is not None:
            spill(rec)

    def sizes(self, args, kwargs):
        return _inputs.sizes(args, kwargs)

    def add_loss(self, loss):
        return self._rec()._loss_buffer.add(loss)

    def keep_slots(self, slots):
        self._rec()._loss_buffer._kept.extend(slots)

    def gradients_mib(self):
        rec = self._rec()
        return _census.gradients_mib(rec._params_cache, rec.device.type, None)

    def parameters_mib(self):
        rec = self._rec()
        return _census.parameters_mib(rec._params_cache, rec.device.type)

    def refresh_parameters(self):
        """The recorder's parameters again where they changed (see
        _Recorder._refresh_parameters), else None."""
        return self._rec()._refresh_parameters()

    def optimizer_state_mib(self):
        rec = self._rec()
        return _census.optimizer_state_mib(rec.optimizers, rec.device.type, rec._params_cache or ())

    def process_mib(self):
        return self._rec()._probe._process_mib()

    def host(self):
        return self._rec()._host.read(True)


def make(rec, hooks):
    """The lane for `rec`, or None where it has none: no native module (or
    one without the lane), not CUDA, MEMDIAG_NATIVE_LANE=0. hooks: the
    recorder's own (timed) hooks, which the lane calls while it is not
    engaged."""
    if os.environ.get("MEMDIAG_NATIVE_LANE", "1") == "0" or not rec._cuda:
        return None
    native = getattr(rec._probe, "native", None)
    if native is None or not hasattr(native, "Lane"):
        return None
    from . import _recorder
    config = {"all_below": rec._all_below, "every": rec._every, "timed_all_below": _recorder._TIMED_ALL_BELOW,
              "timed_every": _recorder._TIMED_EVERY, "device_every": _recorder._DEVICE_EVERY,
              "census": bool(rec.census), "process_memory": bool(rec.process_memory),
              "thread": rec._thread.ident, "profile": os.environ.get("MEMDIAG_LANE_PROFILE") == "1"}
    return native.Lane(hooks, Helpers(rec), rec.device.index, config)


def profile(rec):
    """{part: (ns, calls)} of the lane's time since it was made, where
    MEMDIAG_LANE_PROFILE=1 (else empty): its hooks' bodies, then the parts
    inside them (native/steady_lane.cpp: Part)."""
    return {} if rec._lane is None else dict(rec._lane.profile())


def maybe_engage(rec):
    """Hands the recorder's state to its lane where the loop is at a steady
    step's end (after its step(), or after the zero_grad() that ends its
    cleanup)."""
    from . import _recorder as r
    if rec._lane is None or rec._lane_on or rec._finished or r._active[0] is not rec:
        return
    if rec._step < r._TIMED_ALL_BELOW or rec._host_ns_early is None or rec._step0_micro != 1:
        return
    # Without the model's hooks every step's forward is the backward's to
    # count, which the lane hands back: it would take and return the state
    # every step.
    # A fully sharded model's parameters in use are counted at every phase
    # in the recorder's Python (_take_census), which the lane does not.
    if rec.model is None or rec._gathers or len(rec.optimizers) != 1 or rec._sync_phase or rec._sync_step or rec._forward_stack or rec._in_step_call:
        return
    if (rec._in, rec._last) not in ((r.BETWEEN, r.CLEANUP), (r.CLEANUP, r.STEP)) or rec._pending_loss is not None:
        return
    if rec._evaluation is not None:
        return  # an evaluation the next sample says: the recorder's Python makes it
    if rec._kept is not None and rec._step <= max(r._kept.WALKED_STEPS):
        return
    if rec._modules is not None and (rec._modules.active() or rec._step < max(r._modules.TRACKED_STEPS)):
        return
    if rec.census:
        if rec._gradient_bytes is None:
            return
        if rec._params_cache is None:
            rec._params_cache = rec._parameters()
            rec._state_holders = _census.state_holders(rec.optimizers)
    c = rec._last_census
    census = None if c is None else (c["parameters_mib"], c["gradients_mib"], c["optimizer_state_mib"])
    probe = rec._probe
    buffer = rec._loss_buffer
    lane = rec._lane
    lane.set_losses(buffer._native, len(buffer._kept))
    lane.set_census_dict(c)
    # The holders in a list of the recorder's: the lane keeps it past a
    # spill, and a replaced optimizer is let go by emptying it in place.
    rec._lane_holders = list(rec._state_holders) if rec.census else []
    lane.adopt((_CODES[rec._in], _CODES[rec._last], rec._step, rec._recording, rec._timing, rec._phase_started,
                rec._recount_gradients, census, rec._state_entries, probe._used, probe._used_reserved,
                probe._nvml_used_at, probe._nvml_last, rec._forward_inputs, rec._micro, list(rec._losses)),
               rec._params_cache if rec.census else [], rec._lane_holders)
    rec._lane_on = True


def spill(rec):
    """The lane's state back to the recorder, its samples appended to the
    recorder's as the recorder makes them. Safe to run again if a signal's
    handler interrupts it: the lane's export can be asked again and its
    samples move to the recorder's list in one native call, and _lane_on
    falls only when every field is back (the host-time counts it hands over
    once). Its time counts as the
    recorder's own where the step is timed."""
    if not rec._lane_on:
        return
    from . import _recorder as r
    t = _ns()
    lane = rec._lane
    (in_, last, step, recording, timing, phase_started, recount, census, entries, used, used_reserved, nvml_at,
     nvml_last, inputs, depth, micro, in_step_call, pending, losses, host_ns, timed_later, skipped,
     counted) = lane.export()
    lane.take_into(rec._samples, rec._loss_buffer._kept, _NAMES, r._NO_EXTRA, r._NO_HOST)
    rec._in, rec._last, rec._step = _NAMES[in_], _NAMES[last], step
    rec._recording, rec._timing, rec._phase_started = recording, timing, phase_started
    rec._recount_gradients = recount
    if census is None:
        rec._last_census = None
    else:
        c = lane.census_dict
        if c is None or (c["parameters_mib"], c["gradients_mib"], c["optimizer_state_mib"]) != tuple(census):
            c = {"parameters_mib": census[0], "gradients_mib": census[1], "optimizer_state_mib": census[2]}
        rec._last_census = c
    rec._state_entries = None if entries is None else tuple(entries)
    probe = rec._probe
    probe._used, probe._used_reserved, probe._nvml_used_at, probe._nvml_last = used, used_reserved, nvml_at, nvml_last
    rec._forward_inputs = inputs
    rec._forward_calls = 1  # the lane ran canonical steps only: one call a forward
    rec._forward_stack = [True] * depth
    rec._micro = micro
    rec._in_step_call = in_step_call
    rec._pending_loss = pending
    rec._losses = list(losses)
    if counted:
        rec._uncounted_inputs = (None, None)
        rec._forward_input_bytes = None
    rec._host_ns += host_ns + ((_ns() - t) if timing else 0)
    rec._timed_later += timed_later
    rec._skipped_steps += skipped
    rec._lane_on = False
