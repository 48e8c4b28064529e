"""The recorder: a training loop's phases, sampled at their boundaries and
written as a memdiag report (schema 3) for compare_memory_reports.

Phases, as memory_diagnostics records them: model_ready and optimizer_ready
when recording starts (torch.optim makes its state at the first step(), so
the two are the same instant), then per step forward, backward (repeated per
micro-batch), step and cleanup. With hooks, a phase ends where the loop
crosses into the next one:

  forward   ends when backward starts (the loss computed after the model's
            forward is part of it, as in memory_diagnostics)
  backward  ends when torch.autograd.backward (loss.backward()) returns
  step      ends when optimizer.step() returns
  cleanup   ends at the next zero_grad() after the step (read again at
            each further one before the next forward: the model's, then the
            optimizer's), or else at the next forward of the model, or when
            recording ends; what the loop
            still holds then (the last loss and output, the next batch) is
            what it holds
"""
import contextlib
import os
import socket
import sys
import threading
import time
import uuid
import weakref
from datetime import datetime, timedelta, timezone

import torch

from . import _at_exit, _backward_profile, _census, _inputs, _kept, _lane, _losses, _modules, _probe, _report, _signals
from ._warmup import warm_up

_SEQUENCE_LENGTH_MAX = 1 << 24  # the report reader's bound (limits::kMaxSequenceLength)
SETUP, FORWARD, BACKWARD, STEP, CLEANUP, BETWEEN = "setup", "forward", "backward", "step", "cleanup", "between"
# After the step() of one of several optimizers, before the others' (a GAN
# steps its discriminator, then computes the generator's loss and steps its
# generator): the step goes on, its next backward is its next micro-batch.
BETWEEN_OPTIMIZERS = "between optimizers"
_STEP_PHASES = (FORWARD, BACKWARD, STEP, CLEANUP)
AUTO_ALL_BELOW, AUTO_EVERY = 100, 100  # every=None: all of the first 100 steps, then one in 100

_active = [None]  # the recorder whose hooks are installed (one at a time per process)
_ns = time.perf_counter_ns
_current_thread = threading.current_thread
_is_grad_enabled = torch.is_grad_enabled
_SETUP_PHASES = ("model_ready", "optimizer_ready")
_perf_counter = time.perf_counter  # a phase's clock, in ms: as _probe.now_ms() reads it
_NO_EXTRA = (None, None, None)  # a sample's micro-batch, forward inputs and loss handles
_backward_lock = threading.Lock()
_original_backward = [None]
_original_scaler_step = [None]
_oom_observer_attached = set()
_NO_HOST = (None, None)  # a phase whose host was not read
# On the forward stack (Recorder._forward_stack), beside True and False (a
# call counted or not): an evaluation's top-level call, under no_grad or
# inference_mode, or in eval() mode with gradients on. Neither is True:
# `True in stack` still says whether a counted call is in progress.
_EVALUATING, _EVALUATING_WITH_GRAD = None, 0
# Steady steps whose end reads the device's use though the allocator's
# reserve did not move: memory made outside the allocator (a library's, a
# leak through cudaMalloc) shows as a trend at this cadence.
_DEVICE_EVERY = 10
# The recorder's own host time (the report's note) is timed on every step
# below _TIMED_ALL_BELOW, then on one in _TIMED_EVERY, and the steps between
# are counted at the sampled steps' rate: a timing is two clock reads around
# each hook, about 23 reads a step, and on the H200's host a read measured
# about 1.7 us (a trivial part of the recorder timed in place, session 48),
# against 0.1 us on this project's machine: timing every step cost a
# launch-bound step more than the readings. Scripts that read the clock
# step by step set _TIMED_EVERY = 1.
_TIMED_ALL_BELOW, _TIMED_EVERY = 10, 10
_recordings_started = [0]  # recorders started in this process (environment.earlier_runs_in_process)


def _half_name(dtype):
    """"bfloat16" or "float16" for those dtypes, else None (autocast to
    float32 is accepted on CUDA and lowers nothing)."""
    return {torch.bfloat16: "bfloat16", torch.float16: "float16"}.get(dtype)


def _autocast_by_output(output, model):
    """The half dtype of the forward's first floating output where the
    model's first floating weight is float32: autocast in effect inside the
    call. None otherwise."""
    out = next((t for t in _inputs._tensors(output, 0, [0]) if t.is_floating_point()), None)
    if out is None or _half_name(out.dtype) is None:
        return None
    weight = next((p for p in _unwrap(model).parameters() if p.is_floating_point()), None)
    return _half_name(out.dtype) if weight is not None and weight.dtype == torch.float32 else None


def _is_timed(step):
    """Whether the recorder's hooks are timed on this step: every step below
    _TIMED_ALL_BELOW, then one in _TIMED_EVERY at an offset that turns with
    each block of them. Every tenth step also reads the host and the
    device's use: timing only those (step % 10 == 0) would time the dearest
    steps alone."""
    return step < _TIMED_ALL_BELOW or step % _TIMED_EVERY == (step // _TIMED_EVERY) % _TIMED_EVERY


def _patched_backward(tensors, *args, **kwargs):
    rec = _active[0]
    if rec is None or _current_thread() is not rec._thread:
        return _original_backward[0](tensors, *args, **kwargs)
    try:
        return _recorded_backward(rec, tensors, args, kwargs)
    finally:
        # Whether this backward kept its graph (retain_graph, or
        # create_graph, whose default it is): a next backward with no
        # forward between is then another pass over the same graph.
        # Tensor.backward passes (gradient, retain_graph, create_graph).
        retain = kwargs.get("retain_graph", args[1] if len(args) >= 2 else None)
        if retain is None:
            retain = kwargs.get("create_graph", args[2] if len(args) >= 3 else False)
        rec._backward_retained = bool(retain)


def _recorded_backward(rec, tensors, args, kwargs):
    if rec._lane_on:
        kept = rec._kept
        if kept is not None and kept.retain_graph_at is None and (
                kwargs.get("retain_graph") or (len(args) >= 2 and args[1])):
            _lane.spill(rec)  # the kept walk's record of where retain_graph was asked: the Python below
        elif rec._lane.before_backward(tensors):
            result = _original_backward[0](tensors, *args, **kwargs)
            if not rec._lane.after_backward():  # the lane handed its state back meanwhile
                rec._run_timed(rec._after_backward)
            return result
    if not rec._timing:
        rec._before_backward(tensors)
        if rec._kept is not None:
            rec._kept.backward_called(args, kwargs)
        result = _original_backward[0](tensors, *args, **kwargs)
        rec._after_backward()
        return result
    t = _ns()
    try:
        rec._before_backward(tensors)
        if rec._kept is not None:
            rec._kept.backward_called(args, kwargs)
    finally:
        rec._host_ns += _ns() - t
    result = _original_backward[0](tensors, *args, **kwargs)
    t = _ns()
    try:
        rec._after_backward()
    finally:
        rec._host_ns += _ns() - t
    return result


def _patched_scaler_step(scaler, optimizer, *args, **kwargs):
    # GradScaler.step() skips optimizer.step() when the unscaled gradients
    # hold an inf or a NaN: the optimizer's hooks then never fire, and
    # without this the next forward would read as another micro-batch.
    result = _original_scaler_step[0](scaler, optimizer, *args, **kwargs)
    rec = _active[0]
    if rec is not None and rec._active_here() and any(optimizer is o for o in rec.optimizers):
        if rec._lane_on and not rec._lane.scaler_skipped():
            return result  # it stepped: the optimizer's hooks told the lane
        _lane.spill(rec)
        rec._run_timed(rec._after_scaler_step, optimizer)
    return result


try:  # torch.optim deletes its submodules' names: imported by path
    from torch.optim.optimizer import register_optimizer_step_pre_hook as _register_global_step_pre_hook
except ImportError:  # a torch before 2.0: an optimizer made anew in the loop is not followed
    _register_global_step_pre_hook = None


def _global_step_pre(optimizer, args, kwargs):
    """torch's global step pre-hook, run before any optimizer's own: an
    optimizer the recorder does not follow is looked at once
    (Recorder._optimizer_stepped)."""
    rec = _active[0]
    if rec is None:
        return
    if optimizer in rec.optimizers:
        return  # the loop's every step(): `in` tests identity first, nothing else
    if _current_thread() is not rec._thread or rec._finished or rec._optimizer_step_hooks is None or \
            _in_weak_set(rec._ignored, optimizer):
        return
    rec._run_timed(rec._optimizer_stepped, optimizer)


def _in_weak_set(weak_set, obj):
    try:
        return obj in weak_set
    except TypeError:  # not weakly referable
        return False


def _oom_observer(device, alloc, device_allocated, device_free):
    rec = _active[0]
    if rec is not None:
        rec._on_oom_observed(device, alloc)


_MAX_SEED = 1 << 53  # the report reader's bound (limits::kMaxExactInteger)
_MAX_STEPS = 10_000_000  # limits::kMaxSteps


def _printable(text, shortest, longest):
    return shortest <= len(text) <= longest and all(" " <= c <= "~" for c in text)


class Recorder:
    """Records one training loop. Use memdiag.record(...) around the loop,
    or make one with hooks=False and call mark() at each phase's end."""

    def __init__(self, model=None, optimizer=None, output="memdiag-report.json", *, name=None,
                 description="", batch_size=None, steps=None, seed=None, preset="default", variant=None,
                 device=None, census=True, warmup=True, hooks=True, snapshot=None, remedies=(), sync="none",
                 process_memory=True, every=None, kept=True, modules=True, profile_backward=True):
        # Held, not weakly referred to: the census reads their state at
        # every step, the lane is handed their state holders, and the report
        # describes them at the end (one the loop dropped inside the block
        # would be missing from it); a weak reference would cost a call at
        # each of those. One the loop replaces is let go at the new one's
        # first step(), before the new one makes its state
        # (_optimizer_stepped): the old state is held from the loop's
        # re-creation to that step() only, as a loop that kept its
        # optimizer holds it, so the peak is no higher than that loop's.
        self.optimizers = _optimizer_list(optimizer)
        _check_arguments(model, optimizer, self.optimizers)
        self.model = model
        self.profile_backward = bool(profile_backward)
        # "{rank}" in it, or a rank suffix by default under a launcher:
        # resolved when recording starts and again when the report is written
        # (a process group made inside the block).
        self._output_template = os.fspath(output)
        self.output = self._output_template
        self.name = name or (type(_unwrap(model)).__name__ if model is not None else "python-job")
        self.description = description
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or
                                       not 1 <= batch_size <= (1 << 30)):
            raise ValueError(f"memdiag: batch_size={batch_size!r}: a whole number of samples per step, 1 to 2^30 "
                             "(default: read off the model's inputs)")
        self.batch_size = batch_size
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int) or
                                  not 0 <= steps <= _MAX_STEPS):
            raise ValueError(f"memdiag: steps={steps!r}: a whole number from 0 to {_MAX_STEPS:,} "
                             "(default: the steps the block ran)")
        self.steps_asked = steps
        # A report's seed is a JSON number, exact up to 2^53. One given is
        # refused beyond that; the process's own (torch.initial_seed(), a
        # random 64-bit value unless the job seeded itself) keeps its low
        # 53 bits, and a note says so.
        self._seed_note = None
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= _MAX_SEED:
                raise ValueError(f"memdiag: seed={seed!r}: a whole number from 0 to 2^53 (the largest a report's "
                                 "JSON number carries exactly; default: torch.initial_seed())")
            self.seed = seed
        else:
            self.seed = torch.initial_seed()
            if self.seed > _MAX_SEED:
                self._seed_note = (f"seed: the process's torch.initial_seed() {self.seed} is beyond 2^53; "
                                   f"recorded as its low 53 bits")
                self.seed &= (1 << 53) - 1
        if not isinstance(preset, str) or not _printable(preset, 1, 80):
            raise ValueError(f"memdiag: preset={preset!r}: 1 to 80 printable ASCII characters (default 'default')")
        self.preset = preset
        if variant is not None and (not isinstance(variant, str) or not _printable(variant, 1, 80)):
            # The reader's rule: a label in tables and file names' stead.
            raise ValueError(f"memdiag: variant={variant!r}: 1 to 80 printable ASCII characters, or None")
        self.variant = variant
        if name is not None and (not isinstance(name, str) or not _printable(name, 1, 200)):
            raise ValueError(f"memdiag: name={name!r}: 1 to 200 printable ASCII characters "
                             "(default: the model's class)")
        self.census = census
        self.warmup = warmup
        self.hooks = hooks
        self.snapshot = snapshot
        self.remedies = list(remedies)
        self.device = torch.device(device) if device is not None else _device_of(model)
        self._thread = threading.current_thread()
        self._handles = []
        self._patched = []
        # Optimizers' hooks, by the optimizer's id, for one replaced to be
        # unhooked; the step hooks any optimizer is given (_install_hooks).
        self._optimizer_handles = {}
        self._optimizer_step_hooks = None
        # Optimizers seen stepping that the recorder does not follow
        # (another model's, a recorded wrapper's inner one), and the ones
        # replaced: weakly, to hold none of them alive.
        self._ignored = weakref.WeakSet()
        self._retired = weakref.WeakSet()
        self._replacements = []  # the notes saying so, for stderr at the end
        # The state holders handed to the lane (maybe_engage), emptied in
        # place when an optimizer is replaced: the lane keeps the list.
        self._lane_holders = []
        self._samples = []
        self._events = []
        self._losses = []  # this step's losses (handles into _loss_buffer), one per backward
        self._loss_buffer = None
        self._host_ns = 0  # the recorder's own host time inside the loop (hooks, readings, census), timed steps only
        self._timing = True  # whether this step's hooks are timed (_TIMED_ALL_BELOW, _TIMED_EVERY)
        self._host_ns_early = None  # _host_ns when the first sampled step began
        self._timed_later = 0  # steps timed from _TIMED_ALL_BELOW on
        # The phase in progress, for an error's place: None before start,
        # SETUP, FORWARD, BACKWARD, STEP (from the end of the last backward),
        # CLEANUP (after step()), BETWEEN (after a cleanup, before a forward),
        # BETWEEN_OPTIMIZERS (after one optimizer's step(), before the rest's).
        self._in = None
        self._stepped = set()  # ids of the optimizers that stepped in this step (several given)
        self._zeroed_after_step = False  # a stepped optimizer's or the model's zero_grad() since the last step()
        self._live_at_start = None  # the CPU probe's scan of live tensors, until the walks' start takes it
        # Inside an optimizer's step(): a closure it calls again (LBFGS's
        # line search evaluates the loss several times) is the step's, not
        # another step or micro-batch, once the step's backward is recorded.
        self._in_step_call = 0
        self._forward_calls = 1  # the model's counted calls in the forward phase (chunks before one backward)
        # Whether those calls are chunks of one batch (each call's first
        # tensor following the last's in one storage), and a weak reference
        # to the last call's first tensor, to tell the next call by: the
        # samples are then the calls' added up, not the first call's.
        self._forward_chunked = False
        self._last_input = None
        self._first_call_inputs = (None, None)
        self._recount_gradients = False  # zero_grad() ran after the last sample: the next forward's recounts them
        self._pending_loss = None
        self._step = -1
        self._micro = 0
        self._step0_micro = 1
        self._phase_started = 0.0
        self._inferred_batch = 0
        # A forward of step 0 said its samples: its batch is what they add
        # up to (a pass the model's hooks did not see, a GAN's
        # discriminator on real images, adds none).
        self._step0_forwards_sized = False
        self._autocast = None  # the dtype the first step's forward was autocast to, if it was
        self._forward_inputs = (None, None)  # this micro-batch's forward: (samples, tokens)
        self._forward_input_bytes = None  # what its tensors hold on the device (steps 0 and 1)
        # Per call of the model's forward, whether it counted (a forward
        # under torch.no_grad(), an evaluation, is no step's): its post-hook
        # pops what its pre-hook pushed.
        self._forward_stack = []
        self._uncounted_inputs = (None, None)  # the last forward not counted (eval mode), should backward follow
        # The evaluations since the last sample's reading (forwards of the
        # model that train nothing: a validation pass between steps), for
        # the next sample: [forwards, the most samples, the most tokens,
        # allocated at the first one's start, the peaks at their ends] (on
        # CUDA bytes; on the CPU the probe's marks). None: none ran. While
        # one is pending, _close is the instance's _close_evaluated.
        self._evaluation = None
        # Those of them in eval() mode with gradients on since the last
        # phase boundary, should backward follow and make them the step's
        # forward (a model trained in eval mode): (the pending evaluation
        # before them, their peaks); None: none.
        self._evaluation_grad = None
        # What the loop keeps across steps, named (live tensors walked at a
        # few cleanups); None: not looked for.
        self._kept = _kept.KeptTracker(_unwrap(model)) if kept else None
        if self._kept is not None:
            self._kept.checkpointed = _checkpointing(model)
        # Whether the first backward's graph recomputes (torch.utils.checkpoint
        # called in the model's code, which no attribute of it says); None:
        # no backward looked at yet.
        self._graph_checkpointed = None
        # What the first backward's graph saved outside its checkpointed
        # regions (bytes), where it had any: checkpointing on for part of
        # the model leaves the rest's activations saved.
        self._checkpoint_outside_bytes = None
        # Weights outside the model and its optimizers that the first
        # backward makes gradients for (a teacher run with gradients on).
        self._outside_parameter_bytes = None
        self._backward_retained = False  # the last backward kept its graph (_patched_backward)
        self._backward_again = False  # this backward is another over the last one's graph
        # Step 1's first backward (its second micro-batch's under gradient
        # accumulation), node by node (memdiag/_backward_profile.py):
        # what of its peak is gradients, for the capacity model. Step 1, not
        # 0: step 0's backward makes the autograd thread's cuBLAS workspace
        # and the like, which later steps find made.
        self._backward_profile = None
        self._buffers = None  # (bytes, the largest three) as recording began
        # Where the forward's memory lives, by module (global forward hooks
        # on the first micro-batch of steps 0 and 1); made at start().
        self._want_modules = bool(modules)
        self._modules = None
        self._module_records = None
        self._forward_profile = None  # step 1's forward span by span (_modules.py)
        self._oom = None
        self._signal = None  # the signal (SIGTERM, SIGHUP) that is ending the block, while its handler runs
        self._finished = False
        self._status = None
        self._probe = None
        self._params_cache = None
        self._state_holders = ()  # the optimizers whose `state` the census counts (a wrapped one's too)
        self._gradient_bytes = None  # the native count of the gradients (set at start())
        self._last_census = None
        self._state_entries = None  # how many parameters had optimizer state at the last count
        if sync not in ("none", "step", "phase"):
            raise ValueError(f"memdiag: sync={sync!r}: 'none' (the default), 'step' or 'phase'")
        self.sync = sync
        self._sync_phase = self._sync_step = False  # sync, as the hot path asks it (set at start())
        self._cuda = self._cpu = False  # the probe's kind (set at start())
        self.process_memory = process_memory
        # Which steps are recorded: all of the first AUTO_ALL_BELOW, then one
        # in AUTO_EVERY (a long job's report stays readable: 100,000 steps
        # recorded whole are about 60 MiB); every=N: steps 0 and 1 (the
        # first step() makes the optimizer's state; the second is the
        # steady state), then one in N; every=1: all.
        if every is None:
            self._all_below, self._every = AUTO_ALL_BELOW, AUTO_EVERY
        elif isinstance(every, int) and not isinstance(every, bool) and every >= 1:
            self._all_below, self._every = (2, every) if every > 1 else (1, 1)
        else:
            raise ValueError(f"memdiag: every={every!r}: a whole number of steps, 1 or more (1: record every step)")
        # The steady lane (memdiag/_lane.py): made with the hooks where the
        # native module has it; _lane_on while it holds the state.
        self._lane = None
        self._lane_on = False
        # Whether the recorded model's forward was seen (its hooks, or the
        # steady lane, which engages only on steps that had one) and
        # backward() ran: the loop may call another module.
        self._seen_forward = False
        self._seen_backward = False
        self._gathers = False  # an FSDP2 model: its parameters in use counted at each phase (start())
        self._launch_key = None  # where the launch's id is in the job's store (_launch_begin)
        self._launch = None  # the id, once read
        self._lane_census = None
        self._last = None  # the last boundary crossed
        self._recording = True  # whether the step in progress is recorded
        self._skipped_steps = 0
        # Steps whose zero_grad() came with no step() before it, and the
        # parameters' versions as recording began: where no step() ever ran
        # and the parameters changed, the loop updates them otherwise.
        self._zero_grad_skips = 0
        self._versions_at_start = None

    # ----- the explicit API -------------------------------------------------

    def start(self):
        if self._in is not None:
            raise RuntimeError(f"memdiag: this Recorder already recorded a block (to {self.output}); make a new one "
                               "for another: memdiag.record(model, optimizer, output=...)")
        if _active[0] is not None:
            raise RuntimeError("memdiag: another recorder is already recording in this process")
        meta = _meta_tensor(self.model, self.optimizers)
        if meta is not None or self.device.type == "meta":
            raise ValueError(f"memdiag: {meta or 'the device'} is on the meta device: it holds no memory to "
                             "measure; materialise the model first (model.to_empty(device=...), then initialise it)")
        self.output = _report.output_for_rank(self._output_template, *_report.rank_and_world())
        why = _report.check_output(self.output)
        if why is not None:  # before the loop runs: not after an hour of training
            raise ValueError(f"memdiag: output {self.output}: {why}")
        self._start_time = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        if self.device.type == "cuda":
            self._probe = _probe.CudaProbe(self.device)
            self.device = self._probe.device
            if self._probe.native is None:
                self._events.append(_report.event(
                    "note", SETUP, None, f"allocator readings through torch's Python API, which cost more a phase "
                    f"(the native reading: {self._probe.native_why})", None))
            if self.snapshot:
                torch.cuda.memory._record_memory_history(max_entries=1_000_000)
            if self.device.index not in _oom_observer_attached:
                # No way to detach one: a module-level observer forwards to
                # whichever recorder is active.
                torch._C._cuda_attach_out_of_memory_observer(_oom_observer)
                _oom_observer_attached.add(self.device.index)
        else:
            # What exists now: every live CPU tensor (the model's state and
            # whatever else the process holds), so that a free the profiler
            # reports of one made before recording began (its size known to
            # the allocator's reporter from an earlier profile) is already
            # counted; a free it does not report can only overstate.
            # Those made while no profiler ran are freed unreported: the
            # probe looks at their lifetimes instead.
            live = self._model_state_tensors() + _kept.live_cpu_tensors()
            self._probe = _probe.CpuProbe(_census.storage_bytes(live), live)
            # What the walk names of what the loop made before recording
            # (a dataset held in memory): this scan's, no second one.
            self._live_at_start = live
            if self.snapshot:
                self._events.append(_report.event("note", SETUP, None, "snapshot: the allocator's history is CUDA's; "
                                                  "nothing is dumped on the CPU", None))
        self._gathers = self.census and _fully_sharded(self.model)
        self._cuda = isinstance(self._probe, _probe.CudaProbe)
        self._cpu = isinstance(self._probe, _probe.CpuProbe)
        native = getattr(self._probe, "native", None)  # memdiag/_native.py's module, on CUDA where it was built
        self._host = _probe.HostReader(native)
        self._earlier_runs = _recordings_started[0]
        _recordings_started[0] += 1
        self._launch_key = _launch_begin()
        # The census's gradients counted natively where the native reading was built.
        self._gradient_bytes = getattr(native, "gradient_bytes", None)
        self._sync_phase, self._sync_step = self.sync == "phase", self.sync == "step"
        self._loss_buffer = _losses.LossBuffer(self.device, native)  # page-locked memory first: its allocation may wait
        _active[0] = self
        try:
            return self._start_recording(native)
        except BaseException:
            # Nothing left behind: a recorder that could not start leaves
            # the loop as it found it (a wrapper optimizer's failure once
            # left the CPU's profiler running and the process segfaulted
            # at its exit).
            self._abort_start()
            raise

    def _abort_start(self):
        self._live_at_start = None
        with contextlib.suppress(Exception):
            self._remove_hooks()
        with contextlib.suppress(Exception):
            _lane.spill(self)
        self._lane = None
        if self._kept is not None:
            with contextlib.suppress(Exception):
                self._kept.end()
        with contextlib.suppress(Exception):
            _signals.uninstall(self)
        _at_exit.discard(self)
        if isinstance(self._probe, _probe.CpuProbe):
            with contextlib.suppress(Exception):
                self._probe.stop(self._model_state_tensors() + _kept.live_cpu_tensors())
        if self.snapshot and self._cuda:
            with contextlib.suppress(Exception):
                torch.cuda.memory._record_memory_history(enabled=None)
        self._finished = True
        if _active[0] is self:
            _active[0] = None

    def _start_recording(self, native):
        if self.warmup and self.device.type == "cuda":
            before = torch.cuda.memory_allocated(self.device)
            # The recorder must not change what the loop learns: the warm-up's
            # random numbers come from a forked generator.
            with torch.random.fork_rng(devices=[self.device]):
                warm_up(self.device)
            self._probe.sync()
            made = (torch.cuda.memory_allocated(self.device) - before) / _probe.MIB
            self._events.append(_report.event("warmup", SETUP, None,
                                              "cuBLAS/cuBLASLt workspaces of the main and autograd threads "
                                              "(a matmul on each before the first sample)", made))
        if isinstance(self._probe, _probe.CpuProbe):
            self._probe.start()
        compiled = self.hooks and self._want_modules and _compiled(self.model)
        if compiled:
            # Global module hooks installed in the middle of a compiled
            # forward are traced into its graph: torch.compile breaks the
            # graph at the readings and recompiles until its limit, and the
            # job runs uncompiled (a hostile check's step took 114 ms of
            # the recorder's time against 1 without it).
            self._events.append(_report.event(
                "note", "", None, "the forward by module is not recorded for a compiled model: its hooks would be "
                "traced into the compiled graph (modules=False says the same without this note)", None))
        if self.hooks and self._want_modules and self.model is not None and not compiled:
            # Each module call's start and end: the allocation then and the
            # peak since the reading before (the forward span by span; the
            # phase's peak is carried on). On the first two steps only.
            self._modules = _modules.ModuleTracker(_unwrap(self.model), self._probe.segment)
            if self._kept is not None:
                # A submodule's output the loop (or a hook) keeps is named
                # by the module that made it.
                self._modules.on_output = self._kept.module_returned
        if self.hooks:
            self._install_hooks()
        # Let go whatever comes next: held, they would outlive the loop's own use.
        existing, self._live_at_start = self._live_at_start, None
        if self._kept is not None:
            if self._cuda and self.device.type == "cuda":
                # A scan of the process's objects costs 0.1-0.4 s where a
                # library is imported: made only where the device holds a
                # megabyte or more beyond the model's state and the warm-up
                # (data or a buffer put on the device before the loop).
                state = self._model_state_tensors(device_type="cuda")
                beyond = (torch.cuda.memory_allocated(self.device) - _census.storage_bytes(state) -
                          sum(e["mib"] or 0 for e in self._events if e["kind"] == "warmup") * _probe.MIB)
                if beyond >= _kept.RESIDENT_FLOOR:
                    existing = _kept.live_tensors("cuda")
            # The process's objects so far frozen out of its walks; what
            # it held already of tensors, beside, for the walks to name.
            self._kept.start(existing)
        del existing
        self._in = SETUP
        _signals.install(self)
        _at_exit.add(self)
        self._begin_phase()
        # The model's buffers as recording begins, beside model_ready's
        # sample: what was allocated there beyond the weights may be them.
        self._buffers = _buffers(self.model, self.device)
        self._versions_at_start = self._parameter_versions()
        self._close("model_ready")
        self._close("optimizer_ready")
        self._in = BETWEEN
        return self

    def mark(self, phase, loss=None):
        """Ends `phase` of the current step ("forward", "backward", "step",
        "cleanup"): for loops the hooks cannot see. A forward after a
        cleanup starts the next step; a forward after a backward is the
        next micro-batch."""
        self._run_timed(self._mark, phase, loss)

    def _mark(self, phase, loss):
        _lane.spill(self)
        if phase not in _STEP_PHASES:
            raise ValueError(f"memdiag: mark({phase!r}): one of {', '.join(_STEP_PHASES)}")
        expected = {FORWARD: (CLEANUP, BACKWARD, "optimizer_ready"), BACKWARD: (FORWARD,), STEP: (BACKWARD,),
                    CLEANUP: (STEP,)}[phase]
        previous = self._last_phase()
        if previous not in expected:
            raise ValueError(f"memdiag: mark({phase!r}) after {previous!r} in step {max(self._step, 0)} "
                             f"(expected after {' or '.join(expected)})")
        if phase == FORWARD:
            self._forward_calls = 1
            self._forward_chunked = False
            self._count_forward()  # the phase began at the previous mark
            self._forward_inputs = (None, None)  # mark() is not told what the forward was given
            self._forward_input_bytes = None
        # After the count: a forward's loss belongs to the step it begins.
        if loss is not None and self._recording:
            self._losses.append(self._loss_buffer.add(loss))
        self._close(phase)
        self._in = {FORWARD: BACKWARD, BACKWARD: STEP, STEP: CLEANUP, CLEANUP: BETWEEN}[phase]

    def finish(self, status="complete", error=None):
        """Stops recording and writes the report (once)."""
        if self._finished:
            return self.output
        self._finished = True  # from here a SIGTERM is held until the report is written
        try:
            _lane.spill(self)
            if status == "complete" and self._last_phase() == STEP:
                self._close(CLEANUP)  # the loop ended after its last step()
            elif status == "complete" and self._evaluation is not None and self._evaluation[4] and \
                    self._last == CLEANUP and self._in == BETWEEN:
                # An evaluation after the last step's cleanup (its
                # zero_grad()): the cleanup is read again, as at a further
                # zero_grad(), and says it.
                self._close_again(CLEANUP)
            last = self._samples[-1] if self._samples else None
            if type(last) is tuple and last[0] == CLEANUP and last[6] is _NO_HOST:
                # The host at the last step's end, read off the cadence (what
                # the loop holds on the host when it stops counts).
                self._samples[-1] = last[:6] + (self._host.read(self._cuda),) + last[7:]
            if self._in is not None:
                self._record_end(status, error)
            if self._modules is not None:
                self._host_ns += self._modules.ns  # the first steps' (all timed)
                if self._host_ns_early is not None:
                    self._host_ns_early += self._modules.ns
            if self._step >= 0:
                self._events.append(self._host_time_note())
            if self._skipped_steps:
                steps = self._step + 1
                self._events.append(_report.event(
                    "note", "", None, f"recorded {steps - self._skipped_steps} of {steps} steps (every step below "
                    f"{self._all_below}, then one in {self._every}; every=1 records all)", None))
        finally:
            if self._modules is not None and self._modules.active():
                self._modules.end(completed=False)  # the forward did not reach backward
            self._remove_hooks()
            self.__dict__.pop("_close", None)  # an evaluation's (_close_evaluated): no cycle left
            if self._backward_profile is not None:
                self._backward_profile.remove()  # a backward that ran out of memory
            # The lane holds the recorder's hooks, which hold the recorder:
            # a cycle through an object the collector cannot see, which
            # would keep the model alive after the loop dropped it.
            _lane.spill(self)
            self._lane = None
            if self._kept is not None:
                self._kept.end()
            _at_exit.discard(self)
            if _active[0] is self:
                _active[0] = None
        try:
            return self._write_report()
        finally:
            _signals.uninstall(self)  # after the write: a signal meanwhile was held

    def _write_report(self):
        self._samples = [s if type(s) is dict else _sample_dict(s, self._host) for s in self._samples]
        for why in self._setup_mistakes():
            self._events.append(_report.event("recording", "", None, why, None))
            print(f"memdiag: {why}", file=sys.stderr)
        for why in self._replacements:  # in the events already, where it happened
            print(f"memdiag: {why}", file=sys.stderr)
        inferred = self._inferred_batch if self._step0_forwards_sized else 0
        if self.batch_size is not None and inferred and inferred != self.batch_size:
            # A batch given that the inputs' first dimension does not show
            # (time-major sequences, a batch counted otherwise): the given
            # one wins everywhere, so no forward says another (per-sample
            # figures read at 16 beside a capacity fitted at 128, a hostile
            # check saw).
            for s in self._samples:
                s.pop("samples", None)
                s.pop("tokens", None)
        self._host.close()
        readings = None
        if isinstance(self._probe, _probe.CpuProbe):
            readings = self._probe.stop(self._model_state_tensors() + _kept.live_cpu_tensors())
            self._events.extend(_report.event("note", "", None, n, None) for n in dict.fromkeys(self._probe.notes))
        if self._modules is not None:
            resolve = (lambda mark: readings[mark] if 0 <= mark < len(readings) else None) if readings is not None else None
            self._module_records = self._modules.records(resolve)
            self._forward_profile = self._modules.forward_profile(resolve)
            if self._modules.failed:
                self._events.append(_report.event(
                    "note", "", None, f"the forward by module is not recorded: {self._modules.failed}", None))
        if readings is not None:
            raised = 0
            for s in self._samples:
                mark = s.pop("_mark")
                if type(mark) is list:  # a phase ended again (_close_again): the last reading, the highest peak
                    live, peak = readings[mark[-1]]
                    peak = max(readings[m][1] for m in mark)
                else:
                    live, peak = readings[mark]
                # The tensors counted are allocated: where the profiler did
                # not see them made (a window of the loop's own profiler
                # without profile_memory), the census is the floor.
                counted = round(sum((s.get("tensors") or {}).values()) * _probe.MIB)
                if live < counted:
                    live, raised = counted, raised + 1
                s["allocated_mib"], s["peak_allocated_mib"] = live / _probe.MIB, max(peak, live) / _probe.MIB
                if "_evaluation" in s:
                    forwards, samples, tokens, start, ends = s.pop("_evaluation")
                    start = readings[start][0]
                    s["evaluation"] = {"forwards": forwards, "samples": samples, "tokens": tokens,
                                       "peak_mib": max([start] + [readings[m][1] for m in ends]) / _probe.MIB,
                                       "start_mib": start / _probe.MIB}
            if raised:
                self._events.append(_report.event(
                    "note", "", None, f"the CPU's allocated read below the tensors counted at {raised} phase"
                    f"{'' if raised == 1 else 's'}: raised to the census there", None))
            for e in self._events:
                if "_mark" in e:
                    _, peak = readings[e.pop("_mark")]
                    e["mib"] = peak / _probe.MIB
        self._resolve_losses()
        self._write()
        if self.snapshot and self.device.type == "cuda":
            torch.cuda.memory._record_memory_history(enabled=None)
        return self.output

    def __enter__(self):
        return self.start()

    def _setup_mistakes(self):
        """What the loop did that the recorder was not given the means to
        read, said in the report and on stderr: backward() without the
        recorded model's forward (the loop calls another module), and a
        loop without the optimizer it steps (no step can end)."""
        out = []
        if not self._seen_backward or self.model is None:
            return out
        if not self._seen_forward:
            out.append(f"backward() ran, but the recorded model ({type(_unwrap(self.model)).__name__}) was never "
                       "called: the loop calls another module, or the model's parts (checkpoint_sequential); each "
                       "forward is read up to its backward, but not its batch: record the module the loop calls, "
                       "memdiag.record(module, optimizer, ...), or give batch_size=")
        if not self.optimizers:
            out.append("no optimizer was given: its step() and zero_grad() mark where a step ends, so the whole "
                       "loop reads as one step whose forwards are micro-batches; pass it, memdiag.record(model, "
                       "optimizer, ...)")
        elif self.hooks and self._zero_grad_skips >= 2 and self._zero_grad_skips >= self._step + 1 and \
                self._versions_at_start is not None and self._parameter_versions() != self._versions_at_start:
            # An optimizer wrapper that updates through methods of its own
            # (SAM's first_step() and second_step(), the second calling an
            # inner optimizer's step()): every zero_grad() read as the end
            # of a step without its update, two of them a step of the loop,
            # and the state's rise and fall as a history (a check's SAM over
            # AdamW read "grew as LBFGS's history does").
            names = ", ".join(type(o).__name__ for o in self.optimizers)
            out.append(f"the optimizer given ({names}) never ran step(), yet the parameters changed: the loop updates "
                       "them otherwise (an optimizer wrapper's own methods, as SAM's first_step() and second_step(), "
                       "which call an inner optimizer's step(); or an update by hand), so every zero_grad() was read "
                       "as the end of a step without its update, and one step of the loop may be several here; call "
                       "the wrapper's step(closure) where it has one, or record with hooks=False and "
                       "rec.mark(\"forward\") ... rec.mark(\"cleanup\") once per update")
        return out

    def _parameter_versions(self):
        """The sum of the optimizers' parameters' version counters (each
        in-place change adds one): whether the parameters changed."""
        total = 0
        for o in self.optimizers:
            for group in o.param_groups:
                for p in group["params"]:
                    total += p._version
        return total

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.finish("complete")
        elif issubclass(exc_type, torch.OutOfMemoryError):
            self.finish("oom", exc)
        elif issubclass(exc_type, KeyboardInterrupt) or _signals.raised_by_signal(self, exc):
            self.finish("interrupted", exc)
        else:
            self.finish("failed", exc)
        return False  # the exception goes on to the caller

    @property
    def step(self):
        """The step in progress (0-based); -1 before the first forward."""
        # The lane's own while it holds the state: read, not taken back
        # (another thread may read this while a hook runs).
        return self._lane.step if self._lane_on else self._step

    # ----- hooks -------------------------------------------------------------

    def _install_hooks(self):
        timed = self._timed
        hooks = {"forward_pre": timed(self._forward_pre), "forward_post": timed(self._forward_post),
                 "step_pre": timed(self._step_pre), "step_post": timed(self._step_post)}
        # The steady lane's hooks where it was built: they call these until
        # the loop is steady (memdiag/_lane.py).
        self._lane = lane = _lane.make(self, hooks)
        if lane is not None:
            hooks = {"forward_pre": lane.forward_pre, "forward_post": lane.forward_post, "step_pre": lane.step_pre,
                     "step_post": lane.step_post}
        if self.model is not None:
            # with_kwargs: Hugging Face models are called with keywords only.
            self._handles.append(self.model.register_forward_pre_hook(hooks["forward_pre"], with_kwargs=True))
            # always_call: a forward that raises (and that the loop catches,
            # say to retry a smaller batch) still leaves the nesting count right.
            self._handles.append(self.model.register_forward_hook(hooks["forward_post"], always_call=True))
            self._wrap(self.model, "zero_grad")
        self._optimizer_step_hooks = (hooks["step_pre"], hooks["step_post"])
        for opt in self.optimizers:
            self._hook_optimizer(opt)
        if self.optimizers and _register_global_step_pre_hook is not None:
            # Every optimizer's step() in the process: one the loop made
            # anew in place of the one given (opt = AdamW(model.parameters())
            # every few steps) is followed from its first step()
            # (_optimizer_stepped). A known one costs one identity test.
            self._handles.append(_register_global_step_pre_hook(_global_step_pre))
        with _backward_lock:
            if _original_backward[0] is None:
                _original_backward[0] = torch.autograd.backward
                torch.autograd.backward = _patched_backward
            scaler = _grad_scaler_class()
            if scaler is not None and _original_scaler_step[0] is None:
                _original_scaler_step[0] = scaler.step
                scaler.step = _patched_scaler_step

    def _run_timed(self, fn, *args):
        """fn(*args), its time added to the recorder's own host time (what
        the report says the recorder cost the loop)."""
        t = time.perf_counter_ns()
        try:
            return fn(*args)
        finally:
            self._host_ns += time.perf_counter_ns() - t

    def _timed(self, hook):
        """`hook` as a hook whose time counts as the recorder's (timed in
        place: the hooks run at every phase)."""
        def timed(*args):
            if not self._timing:
                return hook(*args)
            t = _ns()
            try:
                return hook(*args)
            finally:
                self._host_ns += _ns() - t
        return timed

    def _wrap(self, obj, method):
        original = getattr(obj, method)
        me = weakref.ref(self)

        def wrapped(*args, **kwargs):
            result = original(*args, **kwargs)
            rec = me()
            if rec is not None and rec._lane_on and _current_thread() is rec._thread and rec._lane.after_zero_grad():
                return result
            if rec is not None and not rec._timing:
                if _active[0] is rec and _current_thread() is rec._thread and not rec._finished:
                    rec._after_zero_grad(obj)
            elif rec is not None:
                t = _ns()
                try:
                    if _active[0] is rec and _current_thread() is rec._thread and not rec._finished:
                        rec._after_zero_grad(obj)
                finally:
                    rec._host_ns += _ns() - t
            return result

        setattr(obj, method, wrapped)
        self._patched.append((obj, method))

    def _hook_optimizer(self, opt):
        """The step hooks and the zero_grad() wrapper on one optimizer,
        kept apart by optimizer so that one replaced can be unhooked."""
        pre, post = self._optimizer_step_hooks
        if _step_hooks_run(opt):
            handles = [opt.register_step_pre_hook(pre), opt.register_step_post_hook(post)]
            self._handles.extend(handles)
            self._optimizer_handles[id(opt)] = handles
        else:
            self._wrap_step(opt, pre, post)
        self._wrap(opt, "zero_grad")

    def _unhook_optimizer(self, opt):
        """Undoes _hook_optimizer: the instance's wrappers hold it (each
        calls its bound method: a cycle only a collection frees), so they
        go, and the recorder keeps nothing of it."""
        for h in self._optimizer_handles.pop(id(opt), ()):
            h.remove()
            self._handles = [x for x in self._handles if x is not h]
        for obj, method in self._patched:
            if obj is opt:
                with contextlib.suppress(AttributeError):
                    delattr(obj, method)
        self._patched = [(obj, method) for obj, method in self._patched if obj is not opt]

    def _optimizer_stepped(self, new):
        """An optimizer the recorder was not given ran step() (the global
        pre-hook, before the instance's own hooks run). Where its
        parameters are those of an optimizer recorded, the loop replaced
        that one: the recorder follows the new one from this step() on and
        lets the old go. Anything else (another model's optimizer, one a
        recorded wrapper steps inside its own step()) is left alone, as
        before, and not looked at again."""
        if self._finished or not self.optimizers:
            # No optimizer given: nothing is replaced (the report says that
            # the loop had none to read its steps by).
            return
        recorded = self.optimizers
        if _in_weak_set(self._retired, new):
            # One replaced that steps again: both are in use (a loop that
            # steps two over the same weights); followed beside the other,
            # not swapped back and forth a step at a time.
            self._follow_optimizer(None, new, "an optimizer replaced earlier ({new}) ran step() again at step {step}: "
                                   "memdiag follows it beside {others}")
            return
        holders = _census.state_holders(recorded)
        if any(new is h for h in holders) or any(h is o for h in _census.state_holders([new])[1:] for o in recorded):
            # A recorded wrapper's inner optimizer (Lookahead's, SAM's base,
            # ZeroRedundancyOptimizer's .optim), stepped inside the
            # wrapper's step(); or a wrapper of a recorded optimizer, whose
            # inner step() is the one read.
            self._ignore_optimizer(new)
            return
        mine = {id(p) for g in getattr(new, "param_groups", ()) for p in g["params"]}
        old = next((o for o in recorded if any(id(p) in mine for g in o.param_groups for p in g["params"])), None)
        if old is None and self.model is not None:
            # Failing that, the model's weights (replaced modules: the
            # optimizer given holds weights the model no longer has): the
            # optimizer given that holds none of them is the one replaced.
            model = {id(p) for p in self.model.parameters()}
            if model & mine:
                stale = [o for o in recorded if not any(id(p) in model for g in o.param_groups for p in g["params"])]
                old = stale[0] if len(stale) == 1 else None
        if old is None and self.model is not None and mine and \
                mine <= {id(p) for p in self.model.parameters()} and \
                not any(id(p) in mine for o in recorded for g in o.param_groups for p in g["params"]):
            # An optimizer over others of the recorded model's weights that
            # the recorder was not given (one for the body, one for the
            # head, one of them passed): its state is the model's too, and
            # its step() ends the pass. Unfollowed, its 32 MiB of moments
            # read as "a buffer the loop fills", the forward as -12 MiB,
            # and the capacity 30% over the budget (an independent check's).
            self._follow_optimizer(None, new, "an optimizer not given ({new}, over {count} of the model's "
                                   "parameters) ran step() at step {step}: memdiag follows it beside {others}; pass "
                                   "every optimizer of the model to record() so that step 0 is read whole",
                                   count=sum(1 for g in new.param_groups for _ in g["params"]))
            return
        if old is None:
            self._ignore_optimizer(new)
            return
        self._follow_optimizer(old, new, "the optimizer was replaced at step {step} ({old} -> {new}): memdiag follows "
                               "the new one and holds the old one no more")

    def _ignore_optimizer(self, opt):
        with contextlib.suppress(TypeError):  # not weakly referable: looked at again next time
            self._ignored.add(opt)

    def _follow_optimizer(self, old, new, message, **more):
        """Follows `new` in place of `old` (None: beside the others) from
        the step() now starting: its hooks are installed before torch runs
        the instance's, so that this very step() is read."""
        _lane.spill(self)  # the state the lane holds names the old optimizer's state holders
        names = {"new": type(new).__name__, "old": type(old).__name__ if old is not None else "",
                 "others": ", ".join(type(o).__name__ for o in self.optimizers), "step": max(self._step, 0), **more}
        if old is not None:
            self._unhook_optimizer(old)
            self.optimizers = [new if o is old else o for o in self.optimizers]
            self._stepped.discard(id(old))
            with contextlib.suppress(TypeError):
                self._retired.add(old)
        else:
            with contextlib.suppress(TypeError):
                self._retired.discard(new)
            self.optimizers = self.optimizers + [new]
        # What the census and the lane kept of the old one: its state
        # holders. The next count lists them again, and counts every role.
        self._params_cache = None
        self._state_holders = ()
        self._lane_holders.clear()
        self._last_census = None
        self._state_entries = None
        self._hook_optimizer(new)
        why = message.format(**names)
        self._replacements.append(why)
        # No step on the event: compare_memory_reports reads a note with
        # one as a step whose update did not run, and this one's did.
        self._events.append(_report.event("note", "", None, why, None))

    def _wrap_step(self, opt, pre, post):
        """step() of an optimizer whose class never ran Optimizer.__init__
        (timm's Lookahead wraps another optimizer and sets its attributes
        itself): its step runs no hooks, and registering one raises. The
        instance's step is wrapped instead, calling the same hooks as
        torch's would (the optimizer, the call's args and kwargs)."""
        original = opt.step

        def step(*args, **kwargs):
            pre(opt, args, kwargs)
            result = original(*args, **kwargs)
            post(opt, args, kwargs)
            return result

        opt.step = step
        self._patched.append((opt, "step"))

    def _remove_hooks(self):
        for h in self._handles:
            h.remove()
        self._handles = []
        self._optimizer_handles = {}
        # The lane's hooks where it has one: they hold the lane, which holds
        # the recorder's (a cycle the collector cannot see).
        self._optimizer_step_hooks = None
        for obj, method in self._patched:
            with contextlib.suppress(AttributeError):
                delattr(obj, method)  # the instance's wrapper: the class's method shows through again
        self._patched = []
        with _backward_lock:
            if _original_backward[0] is not None and _active[0] in (None, self):
                torch.autograd.backward = _original_backward[0]
                _original_backward[0] = None
            if _original_scaler_step[0] is not None and _active[0] in (None, self):
                _grad_scaler_class().step = _original_scaler_step[0]
                _original_scaler_step[0] = None

    def _active_here(self):
        return _active[0] is self and _current_thread() is self._thread and not self._finished

    def _forward_pre(self, module, args, kwargs):
        if _active[0] is not self or _current_thread() is not self._thread or self._finished:
            return
        if self._kept is not None and self._kept.walking:
            return  # a forward a saved tensor's unpack hook runs, during the walk: none of the loop's
        # A forward under torch.no_grad() or inference_mode (an evaluation
        # between training steps) makes no step and no phase: counting it
        # would start a step that never reaches backward.
        # A model in eval() mode with gradients on (a validation pass that
        # forgot no_grad) is not counted either; should backward follow it
        # (a loop that trains in eval mode), backward counts it then.
        stack = self._forward_stack
        nested = True in stack
        if not stack and _is_grad_enabled():
            self._seen_forward = True  # counted here, or by backward (a model trained in eval mode)
        counted = not nested and module.training and _is_grad_enabled() and \
            not (self._in_step_call and self._last == BACKWARD)
        if not counted and not stack and (not module.training or not _is_grad_enabled()) and \
                not (self._in_step_call and self._last == BACKWARD):
            # An evaluation (a validation pass): its peak is read apart and
            # taken out of the phase's, for the next sample to say.
            grad = _is_grad_enabled()
            self._evaluation_begin(args, kwargs, grad)
            stack.append(_EVALUATING_WITH_GRAD if grad else _EVALUATING)
        else:
            stack.append(counted)
        if not counted:
            if not nested and _is_grad_enabled():
                self._uncounted_inputs = _inputs.sizes(args, kwargs)
                if self._kept is not None and not module.training and self._step in _kept.WALKED_STEPS:
                    # A validation pass that forgot no_grad: its graph is
                    # saved for a backward that does not come.
                    self._kept.no_backward_forward(type(_unwrap(module)).__name__)
            if not nested and self._kept is not None and self._step in _kept.WALKED_STEPS:
                # An evaluation's outputs kept on the device are named by
                # their call too (a check read an eval's logits kept every
                # other step as "1 tensor", no model, no line).
                self._kept.forward_called()
            return
        self._uncounted_inputs = (None, None)
        last = self._last
        # The model called again after one optimizer's step() and before the
        # rest's, with no zero_grad() of a stepped optimizer or of the model
        # between: the same pass (a GAN recorded by its discriminator, whose
        # generator's loss runs through it before the generator's step();
        # an independent check's read 12 steps for 6). A zero_grad() there
        # ends the pass first: an optimizer that steps only some passes.
        continuing = last == STEP and self._in == BETWEEN_OPTIMIZERS and not self._zeroed_after_step
        if last == STEP and not continuing:
            self._close(CLEANUP)
            self._in = BETWEEN
            last = CLEANUP
        if continuing or self._in == BETWEEN or (self._in == STEP and last == BACKWARD):
            # A new step, or the next micro-batch of this one.
            self._forward_calls = 1
            self._count_forward()
            self._begin_phase()  # time between steps (loading data) is no phase's
            self._in = FORWARD
            step = self._step
            if self._kept is not None and step in _kept.WALKED_STEPS:
                # Where the model was called, and what it returned: named
                # only in the steps whose cleanups are walked.
                self._kept.forward_called()
            # Read where a sample takes them (a step not recorded has none).
            self._forward_inputs = inputs = _inputs.sizes(args, kwargs) if self._recording else (None, None)
            self._forward_chunked = False
            first = _inputs.leading(args, kwargs) if self._recording else None
            self._last_input = weakref.ref(first) if first is not None else None
            # What the call's tensors hold on the device, on the first two
            # steps only: a job whose batch is mostly its inputs is told
            # that checkpointing leaves them (they were made before the
            # forward, outside its increment).
            self._forward_input_bytes = _inputs.device_bytes(args, kwargs, self.device) \
                if self._recording and step < 2 else None
            if step == 0:
                if not continuing:
                    # Between two optimizers' step()s the step's batch is
                    # the one its first pass was given, not a new slice.
                    self._batch_from(inputs[0])
                if self._autocast is None and torch.is_autocast_enabled(self.device.type):
                    # The forward's matrix products run in this dtype: the
                    # activations they make are 16-bit already, and the
                    # advice to lower their precision would be taken.
                    self._autocast = _half_name(torch.get_autocast_dtype(self.device.type))
            if self._modules is not None and self._recording and step in _modules.TRACKED_STEPS and \
                    self._modules.wants(step, self._micro):
                # A wrapper (DistributedDataParallel) is not pushed: the
                # user's module inside it is, by the hooks, under its names.
                self._modules.begin(module if _unwrap(module) is module else None, self._step, inputs[:2],
                                    (args, kwargs))
        elif self._in == FORWARD:
            # A second forward before backward (chunks of a batch summed
            # into one loss, two views) stays in the same forward phase:
            # counted, for its activations are all held at once.
            self._forward_calls += 1
            self._chunk_of_one_batch(args, kwargs)

    def _evaluation_begin(self, args, kwargs, grad):
        """A top-level forward of the model that trains nothing starts
        (under no_grad or inference_mode, or in eval() mode with gradients
        on): the phase's peak is put by and the evaluation's read apart
        (the probe's evaluation_begin), counted in the pending evaluation."""
        start = self._probe.evaluation_begin()
        samples, tokens = _inputs.sizes(args, kwargs)
        ev = self._evaluation
        if grad and self._evaluation_grad is None:
            self._evaluation_grad = (None if ev is None else ev[:4] + [list(ev[4])], [])
        if ev is None:
            self._evaluation = ev = [0, None, None, start, []]
            self._close = self._close_evaluated  # the next sample says it
        ev[0] += 1
        if samples is not None and (ev[1] is None or samples > ev[1]):
            ev[1] = samples
        if tokens is not None and (ev[2] is None or tokens > ev[2]):
            ev[2] = tokens

    def _evaluation_end(self, grad):
        """The evaluation's forward ended: its peak read (the probe's
        evaluation_end), the phase's going on without it."""
        end = self._probe.evaluation_end()
        ev = self._evaluation
        if ev is None:
            return
        if self._cuda:
            ev[4] = [max(ev[4][0], end)] if ev[4] else [end]
        else:
            ev[4].append(end)
        if grad and self._evaluation_grad is not None:
            self._evaluation_grad[1].append(end)

    def _evaluation_undo(self):
        """backward() counted the forwards in eval() mode since the last
        boundary as the step's (a model trained in eval mode): they were no
        evaluation, and their peaks are the forward phase's."""
        before, ends = self._evaluation_grad
        self._evaluation_grad = None
        self._evaluation = before
        if ends:
            self._probe.evaluation_undo(ends)

    def _close_evaluated(self, phase, again=False):
        """_close while an evaluation is pending: the sample it makes
        carries the evaluation, which ends there."""
        n = len(self._samples)
        Recorder._close(self, phase, again)
        self._evaluation_grad = None  # a boundary: backward no longer counts them
        ev = self._evaluation
        if ev is not None and len(self._samples) > n and ev[4]:
            self._samples[-1] = self._samples[-1][:7] + (tuple(ev),)
            self._evaluation = None
        if self._evaluation is None:
            self.__dict__.pop("_close", None)

    def _chunk_of_one_batch(self, args, kwargs):
        """Another call of the model in one forward: where its first tensor
        follows the last call's in one storage (x.chunk(K), x.split(n)), the
        calls are chunks of one batch and the samples theirs added up (an
        independent check's ViT split in two read as batch 16 of its 32,
        twice the memory a sample, and unpaired with its baseline). Views
        of a pair made apart are not: the samples stay the first call's."""
        last = self._last_input() if self._last_input is not None else None
        here = _inputs.leading(args, kwargs) if last is not None else None
        if here is not None and (self._forward_calls == 2 or self._forward_chunked) and _inputs.follows(last, here):
            samples, tokens = _inputs.sizes(args, kwargs)
            if not self._forward_chunked:
                self._first_call_inputs = self._forward_inputs
            s0, t0 = self._forward_inputs[:2]
            if s0 is not None and samples is not None:
                self._forward_chunked = True
                self._forward_inputs = (s0 + samples, t0 + tokens if t0 is not None and tokens is not None else None)
                self._batch_from(samples)
                self._last_input = weakref.ref(here)
                return
        if self._forward_chunked:
            # A later call that is no chunk of the same batch: the calls
            # are not one batch's chunks after all; the first call's again.
            if self._step == 0 and self._first_call_inputs[0] is not None:
                self._inferred_batch -= self._forward_inputs[0] - self._first_call_inputs[0]
            self._forward_inputs = self._first_call_inputs
            self._forward_chunked = False
        self._last_input = None

    def _forward_post(self, module, args, output):
        if self._kept is not None and self._kept.walking:
            return
        stack = self._forward_stack
        if stack and _active[0] is self and _current_thread() is self._thread and not self._finished:
            counted = stack.pop()
            if counted:
                if not stack and self._step == 0 and self._autocast is None:
                    # Autocast applied inside the model's call (Accelerate's
                    # prepare() wraps forward in it): the pre-hook saw none, the
                    # output says so, 16-bit from 32-bit weights.
                    self._autocast = _autocast_by_output(output, self.model)
            elif counted is not False and not stack:
                self._evaluation_end(counted is _EVALUATING_WITH_GRAD)
            if not stack and self._kept is not None and self._step in _kept.WALKED_STEPS:
                self._kept.forward_returned(output, type(_unwrap(module)).__name__)

    def _before_backward(self, tensors):
        if self._finished or _active[0] is not self or (self._in_step_call and self._last == BACKWARD):
            return
        self._seen_backward = True
        if self._in == STEP and self._last == BACKWARD and self._backward_retained:
            # A second loss of the same forward, after a backward that kept
            # the graph for it (l1.backward(retain_graph=True); l2.backward()):
            # the same micro-batch's backward, ended again at its end, not a
            # forward the hooks did not see (it was read as a micro-batch of
            # its own that made nothing, the step's activations lost).
            self._in = BACKWARD
            self._backward_again = True
            # Its loss is the step's too: the step's loss is the sum of what
            # backward() was called on.
            self._pending_loss = tensors if isinstance(tensors, torch.Tensor) and tensors.numel() == 1 else None
            if self._kept is not None:
                self._kept.backward_again()
            return
        if self._in == CLEANUP and self._last == STEP:
            # A backward after the step's last step() with no zero_grad()
            # or forward of the model between: the next step began with a
            # pass the hooks did not see (a DCGAN's discriminator on real
            # images, before the generator's forward), and this step's
            # cleanup ends here.
            self._close(CLEANUP)
            self._in = BETWEEN
        if self._in != FORWARD:
            # A forward the model's hooks did not see (checkpoint_sequential
            # calls the model's children, not the model; a GAN's generator
            # loss computed through its discriminator after the
            # discriminator's step()): it ran from the previous phase's end
            # to here.
            if self._in in (BETWEEN, BETWEEN_OPTIMIZERS) or (self._in == STEP and self._last == BACKWARD):
                between_optimizers = self._in == BETWEEN_OPTIMIZERS
                if self._evaluation_grad is not None:
                    self._evaluation_undo()
                self._forward_calls = 1
                self._forward_chunked = False
                self._count_forward()
                # Unseen (None, None), or an eval-mode forward's inputs.
                self._forward_inputs = self._uncounted_inputs
                self._forward_input_bytes = None
                self._uncounted_inputs = (None, None)
                if not between_optimizers:
                    # Between two optimizers' step()s the step's batch is
                    # the one its first pass was given, not a new slice.
                    self._batch_from(self._forward_inputs[0])
            else:
                return
        if self._modules is not None and self._modules.active():
            self._modules.end(completed=True)
        self._close(FORWARD)
        self._in = BACKWARD
        self._pending_loss = tensors if isinstance(tensors, torch.Tensor) and tensors.numel() == 1 else None
        if self._graph_checkpointed is None and isinstance(tensors, torch.Tensor) and tensors.grad_fn is not None:
            owned = frozenset(k for k in map(_kept._storage_key, self._parameters()) if k is not None)
            self._graph_checkpointed, outside, self._outside_parameter_bytes = _kept.checkpointed_graph(
                tensors.grad_fn, owned)
            if outside is not None:
                self._checkpoint_outside_bytes = outside
            if self._graph_checkpointed and self._kept is not None:
                self._kept.checkpointed = True
        # Under gradient accumulation the second micro-batch's: the later
        # micro-batches begin with every gradient made, and it is one of
        # them that peaks (the first makes its gradients as it goes).
        if (self._backward_profile is None and self._step == 1 and self._recording and
                self._micro == (1 if self._step0_micro > 1 else 0) and
                self.profile_backward and isinstance(tensors, torch.Tensor) and tensors.grad_fn is not None):
            self._backward_profile = _backward_profile.BackwardProfile(
                tensors.grad_fn, self._parameters(), self._probe, self._step, *self._forward_inputs[:2])

    def _after_backward(self):
        if self._backward_again:
            self._backward_again = False
            if self._in == BACKWARD and not self._finished and _active[0] is self:
                if self._pending_loss is not None and self._recording:
                    self._losses.append(self._loss_buffer.add(self._pending_loss))
                self._pending_loss = None
                self._close_again(BACKWARD)
                self._in = STEP
            return
        if self._backward_profile is not None and self._backward_profile.remove():
            self._backward_profile.done = True
        if self._in != BACKWARD or self._last != FORWARD or self._finished or _active[0] is not self:
            return
        if self._pending_loss is not None and self._recording:
            self._losses.append(self._loss_buffer.add(self._pending_loss))
        self._pending_loss = None
        self._close(BACKWARD)
        self._in = STEP  # until a step() or the next micro-batch's forward

    def _step_pre(self, optimizer, args, kwargs):
        if not self._active_here():
            return
        self._in_step_call += 1
        if self._last == BACKWARD:
            self._in = STEP

    def _step_post(self, optimizer, args, kwargs):
        if not self._active_here():
            return
        self._in_step_call = max(0, self._in_step_call - 1)
        if self._last == BACKWARD:
            self._close(STEP)
            self._in = CLEANUP
        elif self._in != BETWEEN_OPTIMIZERS:
            return  # a second step() after this one's without a backward between: its memory is the cleanup's
        else:
            # Another of several optimizers' step() right after the last
            # one's (a head's Adam, then a body's SGD): one step phase
            # for both, its sample made again here.
            self._close_again(STEP)
        if len(self.optimizers) > 1:
            # With several optimizers the step ends when each has stepped
            # (a GAN's discriminator, then its generator), or at the model's
            # next forward after a zero_grad() should one not step (a
            # warm-up of one, a skip).
            self._zeroed_after_step = False
            stepped = self._stepped
            stepped.add(id(optimizer))
            self._in = CLEANUP if len(stepped) >= len(self.optimizers) else BETWEEN_OPTIMIZERS
        if self._lane is not None:
            _lane.maybe_engage(self)

    def _after_zero_grad(self, owner=None):
        if self._in_step_call and self._last == BACKWARD:
            return  # a closure's, evaluated again inside step()
        if self._in == BETWEEN_OPTIMIZERS and (owner is self.model or id(owner) in self._stepped):
            self._zeroed_after_step = True  # the pass is over: the model's next call starts the next
        if self._in in (FORWARD, BETWEEN_OPTIMIZERS, BETWEEN):
            # (Between steps: a second zero_grad() after the one that
            # ended the cleanup, each optimizer's own.)
            # zero_grad() between the model's call and backward() (as
            # PyTorch's tutorials place it): the forward's sample counts the
            # gradients again, so the gradients it freed are not read as
            # tensors the loop held from the step before.
            self._recount_gradients = True
        if self._last == BACKWARD and self._in == STEP:
            # zero_grad() after backward with no step() between: the loop
            # skipped the update (a check on the loss, a scaler of its own).
            self._zero_grad_skips += 1
            self._skip_step("step() was not called before zero_grad()")
        if self._last == STEP and self._in != BETWEEN_OPTIMIZERS:
            self._close(CLEANUP)
            self._in = BETWEEN
        elif self._last == CLEANUP and self._in == BETWEEN:
            # Another zero_grad() after the one that ended the cleanup (the
            # model's, then the optimizer's; a master copy's gradients after
            # the model's): the cleanup is read again, so that what the
            # loop holds between steps is read after every one of them.
            self._close_again(CLEANUP)
        if self._lane is not None:
            _lane.maybe_engage(self)

    def _after_scaler_step(self, optimizer):
        if self._last_phase() == BACKWARD and self._in == STEP:
            self._skip_step("step() skipped by the gradient scaler (inf or NaN gradients)", optimizer)

    def _skip_step(self, why, optimizer=None):
        """A step whose optimizer.step() did not run: its step phase is
        recorded where the loop went on (it made nothing), and a note says
        why, so the next forward starts the next step."""
        if self._recording:
            self._events.append(_report.event("note", STEP, self._step, f"step {self._step}: {why}", None))
        # zero_grad() may have run before this sample: every role is counted
        # again, not the gradients of backward (a census above allocated).
        self._last_census = None
        self._close(STEP)
        self._in = CLEANUP
        if optimizer is not None and len(self.optimizers) > 1:
            # One of several skipped (a GAN's discriminator): the step goes
            # on to the others' as if it had stepped.
            self._stepped.add(id(optimizer))
            if len(self._stepped) < len(self.optimizers):
                self._in = BETWEEN_OPTIMIZERS

    # ----- phases ------------------------------------------------------------

    def _last_phase(self):
        return self._last  # the last boundary crossed, recorded or not

    def _count_forward(self):
        if self._last in (CLEANUP, "optimizer_ready"):
            if self._step == 0:
                self._step0_micro = self._micro + 1  # the loop's micro-batches a step, as step 0 ran them
            self._step += 1
            self._micro = 0
            self._losses = []
            self._stepped.clear()
            step = self._step
            timing = _is_timed(step)
            if step >= _TIMED_ALL_BELOW:
                if self._host_ns_early is None:
                    self._host_ns_early = self._host_ns
                self._timed_later += timing
            self._timing = timing
            recording = self._step < self._all_below or self._step % self._every == 0
            if recording and not self._recording:
                self._last_census = None  # steps ran unseen since the last count: count every role again
            if not recording:
                self._skipped_steps += 1
            self._recording = recording
        else:
            self._micro += 1

    def _begin_phase(self):
        """The next phase's clock and peak."""
        self._probe.begin_phase()
        self._phase_started = _perf_counter() * 1000.0

    def _close(self, phase, again=False):
        """Ends `phase` now: samples it (in a recorded step) and starts the
        next one's clock and peak. A sample is kept as a tuple (phase, step,
        the reading, its time, the micro-batch, forward inputs and loss
        handles, the census): the report's dict is made when recording ends
        (_sample_dict). It runs at every phase: written out in one."""
        self._last = phase
        recording = self._recording
        setup = phase in _SETUP_PHASES
        cleanup = phase == CLEANUP
        reset = False  # whether the reading reset the peak for the next phase
        now = None  # the clock at the reading, in ms
        if recording or setup:
            step = None if setup else self._step
            if self._cuda:
                # The allocator's counters are kept on the host in program
                # order: exact without waiting for the device. The device is
                # waited for where a time must be true: every phase with
                # sync="phase", else once a step, at its end (and in setup).
                # The device's use at every phase of the first two steps
                # (cuDNN, NCCL and the like make theirs there), then at the
                # end of every _DEVICE_EVERY-th step (cudaMemGetInfo costs
                # about 25 us in a loop on the H200: a steady step's largest
                # reading), and wherever the allocator's reserve moved. The
                # peak is reset in the reading's call, unless a walk of the live
                # tensors follows (it collects garbage first: the next
                # phase's peak starts after it).
                reset = not (cleanup and self._kept is not None and step in _kept.WALKED_STEPS)
                figures = self._probe.figures(step is None or self._sync_phase or (cleanup and self._sync_step),
                                              self.process_memory,
                                              step is None or step < 2 or (cleanup and step % _DEVICE_EVERY == 0),
                                              reset)
            else:
                figures = self._probe.mark()  # read off the profiler's timeline when recording ends
            # The host where the device's use is read: every phase of setup
            # and of steps 0 and 1 (a step's pattern: what offloading moves
            # out between forward and backward shows there), then the end of
            # every _DEVICE_EVERY-th step and the last (what the host keeps,
            # and whether it grows). A reading costs about 10 us on the
            # 2-core machine and 13-17 us on the H200's host (a pread of
            # statm: a system call, dear there; the host allocator's figure
            # in the same native call on CUDA): at every step's end it was
            # half a percent of a 3 ms step. HostReader.read says why a
            # step's end holds the pinned bytes' most.
            host = self._host.read(self._cuda) if step is None or step < 2 or (
                cleanup and step % _DEVICE_EVERY == 0) else _NO_HOST
            now = _perf_counter() * 1000.0
            elapsed = now - self._phase_started
            if phase == FORWARD:
                extra = (self._micro, self._forward_inputs if self._forward_input_bytes is None and
                         self._forward_calls < 2 else
                         (*self._forward_inputs, self._forward_input_bytes, self._forward_calls,
                          self._forward_chunked), None)
            elif phase == BACKWARD:
                extra = (self._micro, None, None)
            elif phase == STEP and self._losses:
                # Read when recording ends (_resolve_losses): no wait here.
                extra = (None, None, tuple(self._losses))
            else:
                extra = _NO_EXTRA
            self._samples.append((phase, step, figures, elapsed, extra,
                                  self._take_census(phase) if self.census else None, host))
        if cleanup and not again:  # (read again: its walk and window are done)
            if self._launch_key is not None and self._launch is None and self._step == 0:
                # Read while rank 0 surely lives (step 0's collectives ran):
                # where it hosts the store, it may be gone by this rank's end.
                self._launch = _launch_read(self._launch_key)
            if self._kept is not None and recording:
                # The model's state is listed only where a walk needs it.
                self._kept.at_cleanup(self._step, self._state_tensors, self._forward_inputs)
            if self._cpu:
                self._probe.end_step()  # a new window of the profiler's events every few steps: bounded host memory
        if not reset:
            self._probe.begin_phase()
        # The next phase starts now: read again only where work of the
        # recorder's followed the reading (the census, a cleanup's walk), so
        # that it falls in no phase; otherwise the one read serves both.
        self._phase_started = now if now is not None and not cleanup and not self.census else \
            _perf_counter() * 1000.0

    def _close_again(self, phase):
        """Ends `phase` again: the sample it made last (at the previous
        boundary) is replaced by one that runs from its start to now, with
        the higher of the two peaks."""
        last = self._samples[-1] if self._recording and self._samples else None
        if last is None or type(last) is not tuple or last[0] != phase or last[1] != self._step:
            return
        self._samples.pop()
        self._close(phase, again=True)
        new = self._samples[-1]
        figures = new[2]
        if type(figures) is tuple and type(last[2]) is tuple:  # CUDA: (allocated, reserved, used, peak, ...)
            figures = figures[:3] + (max(figures[3], last[2][3]),) + figures[4:]
        elif type(figures) is int and type(last[2]) in (int, list):  # CPU: marks, resolved when recording ends
            # A list (a tuple's figures are CUDA's): every mark the phase
            # ended at, a third backward's too.
            figures = (last[2] if type(last[2]) is list else [last[2]]) + [figures]
        self._samples[-1] = (new[0], new[1], figures, new[3] + last[3]) + new[4:7] + _evaluations(last, new)

    def _take_census(self, phase=None):
        """The census at the end of `phase`. A role is recounted only where
        the phase can change it (the parameters once; gradients in backward
        and cleanup; the optimizer's state in step): a count costs a
        storage lookup per tensor, at every boundary (1.15 ms for all three
        roles of 161 parameters with AdamW on this project's 2-core machine).
        None: recount all. Samples share one dict while nothing changed
        (the report's writing copies them)."""
        kind = self.device.type
        params = self._params_cache
        if params is None:
            params = self._params_cache = self._parameters()
            self._state_holders = _census.state_holders(self.optimizers)
        last = self._last_census
        if last is None or phase is None:
            self._state_entries = self._optimizer_state_entries()
            c = {"parameters_mib": _census.parameters_mib(params, kind),
                 "gradients_mib": _census.gradients_mib(params, kind, self._gradient_bytes),
                 "optimizer_state_mib": _census.optimizer_state_mib(self.optimizers, kind, params)}
        elif phase == BACKWARD or phase == CLEANUP or (phase == FORWARD and self._recount_gradients):
            self._recount_gradients = False
            gradients = _census.gradients_mib(params, kind, self._gradient_bytes)
            c = last if gradients == last["gradients_mib"] else \
                {"parameters_mib": last["parameters_mib"], "gradients_mib": gradients,
                 "optimizer_state_mib": last["optimizer_state_mib"]}
        elif phase == STEP:
            # A parameter's state is made once, at its first update, and
            # then updated in place: recounted only where parameters with
            # state came or went (a count is 32 us for beta's 10 on the H200).
            entries = self._optimizer_state_entries()
            if entries != self._state_entries:
                fresh = self._refresh_parameters()
                if fresh is not None:
                    params = fresh
                    c = {"parameters_mib": _census.parameters_mib(params, kind),
                         "gradients_mib": _census.gradients_mib(params, kind, self._gradient_bytes),
                         "optimizer_state_mib": _census.optimizer_state_mib(self.optimizers, kind, params)}
                else:
                    c = {"parameters_mib": last["parameters_mib"], "gradients_mib": last["gradients_mib"],
                         "optimizer_state_mib": _census.optimizer_state_mib(self.optimizers, kind, params)}
                self._state_entries = entries
            else:
                c = last
        else:
            c = last
        if self._gathers and phase in (FORWARD, BACKWARD, CLEANUP, None):
            # A fully sharded model (FSDP2) swaps its modules' parameters
            # for the weights it all-gathered while they are in use (the
            # root's from its forward to the end of backward): counted with
            # the shards, they are the parameters this phase holds, not
            # activations (16.4 MiB of gathered weights read as a forward
            # of 16.8 MiB at one sample over two Gloo ranks).
            held = _census.parameters_mib(params + list(self.model.parameters()), kind)
            if held != c["parameters_mib"]:
                c = dict(c, parameters_mib=held)
        if phase is not None:
            self._last_census = c
        return c

    def _optimizer_state_entries(self):
        """How many parameters have state, per optimizer state dict, and
        how many keys the first one's has; and where few hold it, the
        length of its lists (LBFGS keeps its
        history as lists in its first parameter's state, which grow in
        place until history_size: a count at the first step alone read
        1.5 MiB of 11)."""
        out = []
        for h in self._state_holders:
            state = h.state
            out.append(len(state))
            # The keys of the first parameter's state: a buffer added to
            # every parameter's later (Lookahead's slow weights at its k-th
            # step) changes no count above.
            first = next(iter(state.values()), None) if isinstance(state, dict) else None
            out.append(len(first) if isinstance(first, dict) else -1)
            # Which parameters hold it, not only how many: a weight replaced
            # in its group, its old state popped and the new one's made
            # (resize_token_embeddings), changes no count, and the census
            # kept the old weight (an independent check's GPT-2 read 19.99
            # MiB of weights for 27.80 from then on).
            ids = 0
            if isinstance(state, dict):
                for k in state:
                    ids ^= id(k)
            out.append(ids)
            if len(state) <= 4:
                out.append(sum(len(v) for st in state.values() if isinstance(st, dict)
                               for v in st.values() if isinstance(v, (list, tuple))))
        return tuple(out)

    def _refresh_parameters(self):
        """The parameters again where the optimizers' hold others than the
        census counts (a param group added, or a new nn.Parameter, inside
        the loop: the census at the cleanups kept the first ones, and the
        new weights read as something else the step kept); None where they
        are the same. Asked where a parameter's state came or went."""
        fresh = self._parameters()
        old = self._params_cache or []
        if len(fresh) == len(old) and all(a is b for a, b in zip(fresh, old)):
            return None
        self._params_cache = fresh
        return fresh

    def _parameters(self):
        seen, out = set(), []
        if self.model is not None:
            out.extend(self.model.parameters())
        for opt in self.optimizers:
            for g in opt.param_groups:
                out.extend(g["params"])
        unique = []
        for p in out:
            if id(p) not in seen:
                seen.add(id(p))
                unique.append(p)
        return unique

    def _state_tensors(self):
        """Every tensor that is the model's state, on any device: what the
        loop is meant to keep between steps."""
        ts = []
        for p in self._parameters():
            ts.append(p)
            if p.grad is not None:
                ts.append(p.grad)
        if self.model is not None:
            ts.extend(self.model.buffers())
        for opt in self.optimizers:
            for state in _census.optimizer_states(opt):
                for s in state.values():
                    ts.extend(_census._state_tensors(s))
        return ts

    def _model_state_tensors(self, device_type="cpu"):
        ts = []
        for p in self._parameters():
            ts.append(p)
            if p.grad is not None:
                ts.append(p.grad)
        if self.model is not None:
            ts.extend(self.model.buffers())
        for opt in self.optimizers:
            for state in _census.optimizer_states(opt):
                for s in state.values():
                    ts.extend(_census._state_tensors(s))
        return [t for t in ts if t.device.type == device_type]

    def _batch_from(self, samples):
        """Step 0's batch: its micro-batches' samples added up."""
        if self._step != 0:
            return
        if samples is not None:
            self._step0_forwards_sized = True
            self._inferred_batch += samples

    # ----- the end -----------------------------------------------------------

    def _on_oom_observed(self, device, alloc):
        try:
            self._oom = self._probe.oom_state(alloc)
            if self.snapshot:
                torch.cuda.memory._dump_snapshot(os.fspath(self.snapshot))
        except Exception as e:  # the observer must not raise into the allocator
            self._oom = None
            self._events.append(_report.event("note", "", None, f"reading the allocator at the failure: {e}", None))

    def _failing_phase(self):
        """The phase in progress when the loop stopped."""
        if self._in == SETUP:
            return "model_ready", None
        if self._in == BETWEEN:
            # Between steps: what the loop was doing belongs to the next step's forward.
            return FORWARD, self._step + 1
        if self._in == STEP and self._last_phase() == BACKWARD and self._micro + 1 < self._step0_micro:
            # After a micro-batch's backward, with more to come (as step 0
            # ran them): the next micro-batch's forward, not step() (which
            # is what it is otherwise: gradient clipping, the update).
            return FORWARD, self._step
        return self._in, self._step

    def _record_end(self, status, error):
        if status == "complete":
            self._status = "complete"
            return
        phase, step = self._failing_phase()
        message = _first_line(error) if error is not None else status
        peak = None
        if isinstance(self._probe, _probe.CudaProbe):
            with contextlib.suppress(Exception):
                peak = self._probe.peak_mib()
        if status == "oom":
            oom = self._oom or _oom_from_message(message)
            e = _report.event("oom", phase, step, message, peak)
            e["oom"] = oom
            if oom is not None and self.census:
                with contextlib.suppress(Exception):
                    oom["tensors"] = self._take_census()
        elif status == "interrupted":
            e = _report.event("interrupted", phase, step, f"interrupted ({_signals.describe(self, error)}) in {phase}",
                              None)
        else:
            e = _report.event("error", phase, step, message, None)
        if isinstance(self._probe, _probe.CpuProbe) and status == "oom":
            e["_mark"] = self._probe.mark()
        self._events.append(e)
        self._status = status

    def _host_time_note(self):
        """What the recorder cost the loop on the host: the time spent in its
        hooks (readings, census and bookkeeping), per step. Where the loop
        is bound by the device, the host's time is hidden behind it and the
        loop runs no slower; where it is bound by launches, this is what it
        adds (scripts/recorder-overhead.py measures both)."""
        steps = self._step + 1
        total, sampled = self._host_ns, ""
        if self._host_ns_early is not None and _TIMED_EVERY > 1:
            # The steps from _TIMED_ALL_BELOW on at their timed steps' rate.
            later = self._host_ns - self._host_ns_early
            # (None timed yet, as in a run of 11 steps: the early steps' rate.)
            rate = later / self._timed_later if self._timed_later else self._host_ns_early / _TIMED_ALL_BELOW
            total = self._host_ns_early + rate * (steps - _TIMED_ALL_BELOW)
            sampled = f"; timed on every step below {_TIMED_ALL_BELOW}, then one in {_TIMED_EVERY}"
        per_step_us = total / 1e3 / steps
        return _report.event("note", "", None,
                             f"recorder host time: {per_step_us:.0f} us a step ({total / 1e6:.1f} ms over "
                             f"{steps} step{'s' if steps != 1 else ''}: hooks, readings"
                             f"{', census' if self.census else ''}{sampled})", None)

    def _seed_notes(self):
        return [_report.event("note", "", None, self._seed_note, None)] if self._seed_note else []

    def _batch_assumed(self):
        """Whether the report's batch is the 1 written where none was seen."""
        inferred = self._inferred_batch if self._step0_forwards_sized else 0
        return self.batch_size is None and self._step >= 0 and not inferred

    def _sequence_length(self):
        """Every recorded forward's tokens per sample, where that is one
        length (token ids of one shape): the report's configuration, so
        that runs of one job at two lengths are two configurations, as
        memory_diagnostics' --sequence-length makes them (read together, a
        run at 256 tokens was told the batch that fits at 128). None where
        the lengths varied or no forward said its tokens."""
        lengths = set()
        for s in self._samples:
            if type(s) is dict and s.get("phase") == FORWARD and s.get("tokens") and s.get("samples"):
                if s["tokens"] % s["samples"]:
                    return None
                lengths.add(s["tokens"] // s["samples"])
        length = lengths.pop() if len(lengths) == 1 else None
        return int(length) if length and length <= _SEQUENCE_LENGTH_MAX else None

    def _batch_seen(self):
        """The batch step 0's inputs showed, where batch_size= was given and
        is another; None otherwise."""
        inferred = self._inferred_batch if self._step0_forwards_sized else 0
        return int(inferred) if self.batch_size is not None and inferred and inferred != self.batch_size else None

    def _batch_notes(self):
        """Where the report's batch came from, when it was not read off
        every forward of step 0."""
        inferred = self._inferred_batch if self._step0_forwards_sized else 0
        if self.batch_size is not None:
            seen = f"; step 0's inputs showed {inferred}" if inferred and inferred != self.batch_size else ""
            return [_report.event("note", "", None, f"batch_size {self.batch_size}: given to the recorder{seen}", None)]
        if self._step >= 0 and not inferred:
            return [_report.event("note", "", None, "the batch could not be read off the model's inputs (no tensor "
                                  "with a batch dimension among them): 1 is assumed; give batch_size= to the recorder",
                                  None)]
        return []

    def _resolve_losses(self):
        """Each step's loss from the copies made without waiting: the
        device is waited for once, here. A device that cannot be waited for
        (an error left it unusable) leaves the steps without a loss."""
        with_loss = [s for s in self._samples if "_loss_handles" in s]
        if not with_loss:
            return
        try:
            if self.device.type == "cuda":
                self._probe.sync()
            values = self._loss_buffer.values()
        except Exception as e:
            values = None
            self._events.append(_report.event("note", "", None, f"the losses could not be read back: {_first_line(e)}",
                                              None))
        for s in with_loss:
            handles = s.pop("_loss_handles")
            if values is not None:
                # The sum of what backward was called on: the step's mean
                # loss when each micro-batch's loss is divided by their
                # number, as gradient accumulation does.
                s["loss"] = sum(values[h] for h in handles)

    def _write(self):
        params = self._parameters()
        steps_done = max(self._step + 1, 0)
        final_sum = final_sq = None
        if self._status == "complete" and params:
            with torch.no_grad():
                # One device round trip per device, not two per parameter.
                final_sum = final_sq = 0.0
                # A sharded (DTensor) parameter: this rank's shard.
                local = [getattr(p, "_local_tensor", None) if getattr(p, "_local_tensor", None) is not None else p
                         for p in params]
                for dev in {p.device for p in local}:
                    on = [p.detach().double() for p in local if p.device == dev]
                    sums = torch.stack([torch.stack([t.sum(), t.pow(2).sum()]) for t in on]).sum(0).tolist()
                    final_sum, final_sq = final_sum + sums[0], final_sq + sums[1]
        self._events.extend(self._batch_notes())
        self._events.extend(self._seed_notes())
        if self._cpu and _report.rank_and_world()[1] > 1:
            # Seen with FSDP2 over 2 Gloo ranks: post-cleanup allocated rose
            # 90 -> 175 MiB over 6 steps while the census, the kept walks and
            # the resident set stayed flat; one rank of the same job, flat.
            self._events.append(_report.event(
                "note", "", None, "CPU allocated across ranks can overstate: PyTorch's profiler does not see the "
                "frees made in the collectives' own threads (Gloo), so post-cleanup growth here is not by itself a "
                "leak; what the kept walks name, and a CUDA run, tell", None))
        if self._kept is not None:
            kept = self._kept.records()
            if kept:
                self._events.append(_kept_event(kept, self._kept.walk_ms, self._kept.walked_steps,
                                                self._kept.stacks_ms if self._kept.stacks_read() else None))
        if self._module_records is not None:
            self._events.append(_modules_event(self._module_records))
        env = self._probe.environment()
        # The host figures are the process's: what an earlier recording in
        # it left in the C library's heap is counted too.
        env["earlier_runs_in_process"] = self._earlier_runs
        env.update({"torch_version": torch.__version__, "host": socket.gethostname(), "start_time": self._start_time})
        report = _report.build(
            case={"name": self.name, "description": self.description, "builtin": False,
                  "model": _describe_model(self.model), "optimizer": [_describe_optimizer(o) for o in self.optimizers]},
            config={"batch_size_per_device": int(self.batch_size or
                                                 (self._inferred_batch if self._step0_forwards_sized else 0) or 1),
                    "batch_assumed": True if self._batch_assumed() else None,
                    "batch_seen": self._batch_seen(),
                    "preset": self.preset, "steps": int(self.steps_asked if self.steps_asked is not None else steps_done),
                    "sequence_length": self._sequence_length(),
                    "device": str(self.device) if self.device.type != "cpu" else "cpu", "seed": self.seed,
                    "memory_limit_mib": self._probe.memory_limit_mib(), "remedies": self.remedies,
                    "allocator_settings": _allocator_settings() if self.device.type == "cuda" else "",
                    "parallelism": _parallelism(self.model, self.optimizers,
                                                self._launch or _launch_read(self._launch_key)),
                    "variant": self.variant,
                    "step_sampling": ({"all_below": self._all_below, "every": self._every}
                                      if self._skipped_steps else None)},
            model={"parameters": sum(p.numel() for p in params),
                   "parameter_bytes": _census.storage_bytes(params),
                   "trainable_parameter_bytes": _census.storage_bytes([p for p in params if p.requires_grad]),
                   "largest_module_bytes": _largest_module_bytes(self.model), "autocast": self._autocast,
                   "buffer_bytes": self._buffers[0] if self._buffers else None,
                   "largest_buffers": self._buffers[1] if self._buffers else None,
                   "checkpointing": True if self._graph_checkpointed or _checkpointing(self.model) else None,
                   "checkpoint_outside_mib": (None if self._checkpoint_outside_bytes is None
                                              else self._checkpoint_outside_bytes / _probe.MIB),
                   "outside_parameters_mib": (self._outside_parameter_bytes / _probe.MIB
                                              if self._outside_parameter_bytes else None),
                   "final_parameter_sum": final_sum, "final_parameter_sum_of_squares": final_sq,
                   "backward_profile": (self._backward_profile.readings() if self._backward_profile is not None
                                        and self._backward_profile.done else None),
                   "forward_profile": self._forward_profile},
            environment=env, samples=self._samples, events=self._events, status=self._status)
        with contextlib.suppress(ValueError):
            self.output = _report.output_for_rank(self._output_template, *_report.rank_and_world())
        _report.write_atomic(self.output, report)
        steps = max(self._step + 1, 0)
        print(f"memdiag: wrote {self.output} (status {self._status}, {steps} step{'' if steps == 1 else 's'})",
              file=sys.stderr)


def record(model=None, optimizer=None, output="memdiag-report.json", **options):
    """Records the training loop inside the `with` block:

        with memdiag.record(model, optimizer, output="run.json"):
            for x, y in loader:
                loss = loss_fn(model(x), y)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)

    output may hold "{rank}"; under a launcher (a process group, or
    torchrun's RANK and WORLD_SIZE) without it, each rank's report gets
    "-rankK" before the extension, as memory_diagnostics names them.

    Options: name (the case; default the model's class), batch_size
    (default: read off the forward's arguments, positional or keyword,
    through dicts, mappings, tuples, lists and dataclasses: the first
    tensor's size(0), summed over the micro-batches of step 0; each step's
    own samples, and tokens for token-id inputs, are in the report; a
    batch_size given wins, and the report says so), steps, seed, preset, variant (a label for a
    change recorded against the run without one), census (the tensor census
    by role at each phase; False for the lowest overhead), warmup (make the
    cuBLAS workspaces before the first sample, as memory_diagnostics does),
    hooks (False: call rec.mark() yourself), snapshot (a path: the
    allocator's history, dumped at an out-of-memory error for memory_viz),
    device (default: the model's), sync ("none", the default: the
    recorder never waits for the device, so the loop runs as it would
    without it; the allocator's figures are exact anyway, being kept on the
    host in program order, but a phase's time is the host's; "step": the
    device is waited for at each step's end, so each step's time is true;
    "phase": at every phase boundary, each phase's time true, at the cost of
    the overlap between the host and the device), process_memory (False:
    do not ask NVML for this process's MiB, where pynvml is installed;
    it is asked only when the device's used memory moved), every (record
    steps 0 and 1, then one step in `every`; default: every one of the first
    100 steps, then one in 100, so that a long job's report stays readable;
    1: every step), kept (default True: the live tensors are walked at the
    cleanups of steps 0 to 6, and what the loop keeps every step is named in
    the report: the tensors' shape, dtype, the model output they are and the
    line that called the model; a graph that outlives its step;
    backward(retain_graph=True); False: not looked for), modules (default
    True: on the first micro-batch of steps 0 and 1, every module's forward
    is read before and after from global forward hooks, and the report
    says which modules and module types hold the forward's memory; about
    two allocator readings a module call on those steps only),
    profile_backward (default True: step 1's first backward is read node by
    node, what it holds above its start and how much of that is gradients,
    so that the largest batch predicted keeps the gradients fixed and grows
    the rest; one allocator reading per autograd node, on that backward
    only)."""
    return Recorder(model, optimizer, output, **options)


def _evaluations(first, second):
    """The evaluation a sample read again (_close_again) carries: those of
    both readings (a tuple of one, or none), as one."""
    a, b = first[7] if len(first) > 7 else None, second[7] if len(second) > 7 else None
    if a is None or b is None:
        return (a or b,) if a or b else ()
    def most(x, y):
        return y if x is None else x if y is None else max(x, y)
    # The peaks (CUDA's bytes, the CPU's marks) are taken the highest of
    # when the report is made.
    return ((a[0] + b[0], most(a[1], b[1]), most(a[2], b[2]), a[3], a[4] + b[4]),)


def _sample_dict(sample, host_reader):
    """A sample as the report holds it, from what _sample kept."""
    phase, step, figures, elapsed, (micro, inputs, losses), census, (statm, pinned) = sample[:7]
    if type(figures) is tuple:  # CUDA
        allocated, reserved, used, peak, inactive, process, retries = figures
        s = {"phase": phase, "step": step, "allocated_mib": allocated, "reserved_mib": reserved,
             "device_used_mib": used, "peak_allocated_mib": peak, "inactive_split_mib": inactive,
             "process_device_mib": process, "alloc_retries": retries}
    else:  # the CPU: a mark on the profiler's timeline
        s = {"phase": phase, "step": step, "allocated_mib": 0.0, "reserved_mib": None, "device_used_mib": None,
             "peak_allocated_mib": 0.0, "inactive_split_mib": None, "process_device_mib": None, "_mark": figures}
    s["elapsed_ms"] = max(0.0, elapsed)
    if statm is not None:
        s["host_resident_mib"] = host_reader.resident_mib(statm)
    if pinned is not None:
        s["host_pinned_mib"] = pinned / _probe.MIB
    if micro is not None:
        s["micro_batch"] = micro
    if inputs is not None:
        samples, tokens = inputs[0], inputs[1]
        if len(inputs) > 2 and inputs[2] is not None:
            s["input_mib"] = inputs[2] / _probe.MIB
        if len(inputs) > 3 and inputs[3] > 1:
            s["forwards"] = inputs[3]
            if len(inputs) > 4 and inputs[4]:
                s["forwards_chunked"] = True
        if samples is not None:
            s["samples"] = samples
            if tokens is not None:
                s["tokens"] = tokens
    if losses:
        s["_loss_handles"] = list(losses)
    s["tensors"] = census
    if len(sample) > 7:
        forwards, samples, tokens, start, peaks = sample[7]
        if type(figures) is tuple:
            s["evaluation"] = {"forwards": forwards, "samples": samples, "tokens": tokens,
                               "peak_mib": max(peaks) / _probe.MIB, "start_mib": start / _probe.MIB}
        else:  # the CPU's marks, read off the profiler's timeline when recording ends
            s["_evaluation"] = (forwards, samples, tokens, start, peaks)
    return s


def _unwrap(model):
    # torch.compile's wrapper and DistributedDataParallel keep the user's module inside.
    for attr in ("_orig_mod", "module"):
        if model is not None and hasattr(model, attr) and isinstance(getattr(model, attr), torch.nn.Module):
            return _unwrap(getattr(model, attr))
    return model


def _compiled(model):
    """Whether torch.compile compiles the model or a module inside it (the
    wrapper torch.compile returns, or nn.Module.compile() in place)."""
    if model is None:
        return False
    return any(hasattr(m, "_orig_mod") or getattr(m, "_compiled_call_impl", None) is not None for m in model.modules())


def _kept_event(records, walk_ms, walked=_kept.WALKED_STEPS, stacks_ms=None):
    held = [r for r in records if r["what"] == "held"]
    resident = [r for r in records if r["what"] == "resident"]
    records_kept = [r for r in records if r["what"] not in ("held", "resident")]

    def one(r):
        if r["what"] == "graph":
            return (f"a graph that outlives its step: a live tensor's autograd graph grew to {r['graph_nodes']} nodes "
                    f"from {r['graph_nodes_before']} at the cleanup before")
        if r["what"] == "retain_graph":
            return f"backward(retain_graph=True) at {r['where'] or 'an unknown line'}"
        if r["what"] == "held_graph":
            return (f"a graph no backward ran through: a forward of {r['made_by']} with autograd on outside the "
                    f"training step (at {r['where'] or 'an unknown line'}) held {r['mib_per_step']:.1f} MiB saved "
                    f"at consecutive cleanups")
        shape = (" x ".join(str(d) for d in r["shape"]) or "a scalar") + (" (its shape varying)" if r.get("shape_varies") else "")
        if r.get("shapes"):
            shape = f"{r['shapes']} shapes, the largest {shape}," 
        if r.get("grows"):
            what = f"the {r['made_by']}" if r.get("made_by") else "a tensor replaced every step by a larger copy of itself"
            return f"{what}, grown every step ({shape} {r['dtype']} by the last walk, +{r['mib_per_step']:.1f} MiB a step)"
        made = (f" ({r['made_by']}" + (f", called at {r['where']}" if r.get("where") else "") + ")") if r.get("made_by") else ""
        at = f", allocated at {r['allocated_at']}" if r.get("allocated_at") else ""
        return f"{r['per_step']} tensor(s) of {shape} {r['dtype']}{made}{at}, {r['mib_per_step']:.1f} MiB a step"
    said = ("kept across steps: " + "; ".join(one(r) for r in records_kept)) if records_kept else "nothing kept across steps"
    if held:
        said += f"; each step's tensors the loop held at its cleanup: {held[0]['mib_per_step']:.1f} MiB (the median)"
    if resident:
        said += ("; alive at every cleanup walked from the one that found it, not the model's state: " +
                 ", ".join((f"{r['made_by']}, {r['per_step']} tensors, the largest " if r.get("made_by") else "") +
                           f"{' x '.join(str(d) for d in r['shape']) or 'a scalar'} {r['dtype']} "
                           f"({r['mib_per_step']:.1f} MiB, from step {r['from_step']}" +
                           (f", allocated at {r['allocated_at']}" if r.get("allocated_at") else "") + ")"
                           for r in resident))
    e = _report.event("kept", "", None, said +
                      f" (live tensors walked at the cleanups of steps "
                      f"{', '.join(map(str, walked))}: "
                      f"{walk_ms:.0f} ms" +
                      (f"; the allocator's stacks of live blocks read in {stacks_ms:.0f} ms" if stacks_ms is not None else "")
                      + ")", None)
    e["kept"] = records
    e["walked_steps"] = list(walked)
    return e


def _modules_event(records):
    mods = records["modules"]
    top = [r for r in mods if r["parent"] is None and r["name"] is not None]
    total = sum(r["mib"] for r in mods if r["parent"] is None)
    # A sharded model's modules free what they gathered (FSDP2 reshards
    # after each forward): the total may be negative, which no event's MiB
    # is; the records keep their own signs.
    e = _report.event("modules", FORWARD, records["step"],
                      f"forward by module, step {records['step']}: {len(mods)} modules, {total:.1f} MiB added"
                      + (f" ({top[0]['type']}'s forward {top[0]['mib']:.1f})" if top else ""),
                      total if total >= 0 else None)
    e["modules"] = mods
    return e


def _grad_scaler_class():
    try:
        from torch.amp.grad_scaler import GradScaler
        return GradScaler
    except ImportError:  # an older torch: nothing to patch
        return None


def _meta_tensor(model, optimizers):
    """What of the model or the optimizers' parameters is on the meta
    device (shapes without storage), named; None when nothing is."""
    if model is not None:
        for name, p in model.named_parameters():
            if p.is_meta:
                return f"parameter {name}"
        for name, b in model.named_buffers():
            if b.is_meta:
                return f"buffer {name}"
    for o in optimizers:
        for g in o.param_groups:
            if any(p.is_meta for p in g["params"]):
                return f"a parameter of {type(o).__name__}"
    return None


def _optimizer_like(obj):
    """An optimizer as the recorder uses one: its step() and zero_grad()
    mark where a step ends, its param_groups hold what it updates (a
    torch.optim.Optimizer, or a wrapper such as timm's Lookahead)."""
    return callable(getattr(obj, "step", None)) and callable(getattr(obj, "zero_grad", None)) and \
        hasattr(obj, "param_groups")


def _optimizer_list(optimizer):
    """record()'s optimizer argument as a list: none, one, or several."""
    if optimizer is None:
        return []
    return list(optimizer) if isinstance(optimizer, (list, tuple)) else [optimizer]


def _check_arguments(model, optimizer, optimizers):
    """One line naming what was passed where, for the mistakes a first
    call makes (the two swapped, a function for the model); optimizers is
    the optimizer argument as a list."""
    def what(obj):
        return f"{type(obj).__module__}.{type(obj).__qualname__}"
    usage = "memdiag.record(model, optimizer, output=...)"
    if model is not None and not isinstance(model, torch.nn.Module):
        if _optimizer_like(model) and isinstance(optimizer, torch.nn.Module):
            raise TypeError(f"memdiag: the model and the optimizer are swapped (model is a {what(model)}, optimizer "
                            f"a {what(optimizer)}): {usage}")
        raise TypeError(f"memdiag: model is a {what(model)}, not a torch.nn.Module: pass the module the loop calls, "
                        f"{usage}")
    for opt in optimizers:
        if not _optimizer_like(opt):
            raise TypeError(f"memdiag: optimizer is a {what(opt)}, not an optimizer (step(), zero_grad() and "
                            f"param_groups; or a list of them): {usage}")


def _device_of(model):
    if model is not None:
        for p in model.parameters():
            return p.device
    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def _first_line(error):
    text = f"{type(error).__name__}: {error}" if not isinstance(error, torch.OutOfMemoryError) else str(error)
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__


def _oom_from_message(message):
    """Where no observer ran (the CPU, a simulated failure): PyTorch's
    message still names the request."""
    import re
    m = re.search(r"Tried to allocate ([0-9.]+) (B|KiB|MiB|GiB)", message)
    if not m:
        return None
    scale = {"B": 1.0 / (1 << 20), "KiB": 1.0 / 1024, "MiB": 1.0, "GiB": 1024.0}[m.group(2)]
    return {"request_mib": float(m.group(1)) * scale, "limit_mib": None, "device_free_mib": None,
            "allocated_mib": None, "reserved_mib": None, "inactive_split_mib": None,
            "inactive_split_blocks": None, "largest_free_block_mib": None, "num_alloc_retries": None,
            "num_ooms": None}


def _allocator_settings():
    return os.environ.get("PYTORCH_ALLOC_CONF") or os.environ.get("PYTORCH_CUDA_ALLOC_CONF") or ""


def _parallelism(model, optimizers=(), launch=None):
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        return {"mode": "none", "world_size": 1, "rank": 0, "local_rank": 0, "backend": "none",
                "rank_zero_extra_samples": 0}
    out = {"mode": _sharding_mode(model, optimizers), "world_size": dist.get_world_size(), "rank": dist.get_rank(),
           "local_rank": int(os.environ.get("LOCAL_RANK", 0)), "backend": str(dist.get_backend()),
           "rank_zero_extra_samples": 0}
    launch = launch or _launch_fallback()
    if launch is not None:
        out["launch"] = launch
    return out


# The launch's id: what the ranks of one launch share and no other launch
# has, so that reports of several launches compared together make one rank
# set a launch (the same command run twice has the same MASTER_PORT, and
# torchrun's run id is "none" unless a rendezvous id is given). Rank 0
# draws it when its first recording starts and leaves it in the job's
# store, once for the launch (a rank that records more blocks than the
# others reads the same); the others read it at their first cleanup, by
# when rank 0 has started (step 0's collectives ran) and still lives (it
# may host the store and end first). A key a restart attempt: torchrun's
# store outlives an attempt (--max-restarts), and an independent check's
# two attempts, one failed and one complete, read as one rank set with
# ranks given twice; memory_diagnostics keys its own the same way.
_LAUNCH_KEY = "memdiag/launch"


def _launch_key():
    return f"{_LAUNCH_KEY}/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"
_LAUNCH_WAIT = timedelta(seconds=10)


def _plain_id(value):
    return 0 < len(value) <= 64 and all(c.isascii() and (c.isalnum() or c in "-_.:") for c in value)


def _default_store():
    import torch.distributed as dist
    if not (dist.is_available() and dist.is_initialized()):
        return None
    try:
        return dist.distributed_c10d._get_default_store()
    except Exception:  # a process group without a store (a fake one, an older torch)
        return None


def _launch_begin():
    """The store key of the launch's id (rank 0 sets it, the first time),
    or None where the job has no process group yet."""
    store = _default_store()
    if store is None:
        return None
    import torch.distributed as dist
    if dist.get_rank() == 0:
        try:
            # The first recording's id stays: compare_set writes only
            # where the key is absent.
            store.compare_set(_launch_key(), "", uuid.uuid4().hex[:16])
        except Exception:
            return None
    return _launch_key()


def _launch_read(key):
    """The launch's id from the store, or None (rank 0 never started
    recording, the store is gone): the report then says no launch."""
    store = _default_store() if key is not None else None
    if store is None:
        return None
    try:
        if not store.check([key]):
            store.wait([key], _LAUNCH_WAIT)
        value = store.get(key).decode("ascii", "replace")
        return value if _plain_id(value) else None
    except Exception:
        return None


def _launch_fallback():
    """torchrun's rendezvous id where one was given (--rdzv-id, or
    --standalone's own): the same for every rank of the launch, though a
    later launch given the same id shares it."""
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "")
    return run_id if run_id != "none" and _plain_id(run_id) else None


def _fully_sharded(model):
    """Whether the model's modules gather their parameters for a forward
    and free them after (FSDP2's fully_shard): its parameters in use are
    other tensors than the shards the recorder holds."""
    if model is None:
        return False
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return False
    return any(isinstance(m, FSDPModule) for m in model.modules())


def _sharding_mode(model, optimizers):
    """What each rank keeps a shard of, read from the job's own objects:
    FSDP (fully_shard's modules: parameters, "zero3"; the wrapper class by
    its sharding strategy), ZeroRedundancyOptimizer ("zero1"), else the model
    state is replicated ("ddp")."""
    if _fully_sharded(model):
        return "zero3"
    modules = list(model.modules()) if model is not None else []
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy
        for m in modules:
            if isinstance(m, FullyShardedDataParallel):
                strategy = getattr(m, "sharding_strategy", ShardingStrategy.FULL_SHARD)
                if strategy == ShardingStrategy.NO_SHARD:
                    return "ddp"
                if strategy in (ShardingStrategy.SHARD_GRAD_OP, getattr(ShardingStrategy, "_HYBRID_SHARD_ZERO2", None)):
                    return "zero2"
                return "zero3"
    except ImportError:
        pass
    try:
        from torch.distributed.optim import ZeroRedundancyOptimizer
        if any(isinstance(o, ZeroRedundancyOptimizer) for o in optimizers):
            return "zero1"
    except ImportError:
        pass
    return "ddp"


def _buffers(model, device):
    """(bytes of the model's buffers on the recorded device, each storage
    once; the largest three as {"name", "bytes"}), or None without a model
    or such buffers. A buffer is state a module keeps that is no parameter
    (MoCo's queue of past keys, batch norm's running statistics). Counted
    by the census's rules: a DTensor's local shard, nothing for a tensor
    without storage (sparse, meta), another device's not at all."""
    if model is None:
        return None
    try:
        named = [(n, b) for n, b in _unwrap(model).named_buffers() if isinstance(b, torch.Tensor)]
    except (AttributeError, RuntimeError):
        return None
    cuda = device.type == "cuda"
    total, each = _census._Counter(cuda), []
    for n, b in named:
        one = _census._Counter(cuda)
        one.add(b)
        total.add(b)
        if one.bytes:
            each.append((one.bytes, n))
    if not each:
        return None
    largest = sorted(each, reverse=True)[:3]
    return total.bytes, [{"name": n, "bytes": int(size)} for size, n in largest]


def _largest_module_bytes(model):
    """The largest module's own weights, whole: a sharded (DTensor)
    parameter counts at its full size, not this rank's shard, for a rank
    gathers a unit's whole weights to run it (FSDP2's fully_shard) and
    the capacity model holds them per parameter, not per sample."""
    if model is None:
        return None
    largest = 0
    for m in model.modules():
        own = list(m.parameters(recurse=False))
        if not own:
            continue
        whole = [p for p in own if getattr(p, "_local_tensor", None) is not None]
        local = [p for p in own if getattr(p, "_local_tensor", None) is None]
        size = _census.storage_bytes(local) + sum(p.numel() * p.element_size() for p in whole)
        largest = max(largest, size)
    return largest


def _step_hooks_run(opt):
    """Whether torch runs opt's step hooks: Optimizer.__init__ made the
    hooks' dictionaries and wrapped its class's step (profile_hook_step,
    marked `hooked`). A class that skips it (timm's Lookahead) has
    neither."""
    return hasattr(opt, "_optimizer_step_pre_hooks") and hasattr(opt, "_optimizer_step_post_hooks") and bool(
        getattr(type(opt).step, "hooked", False))


def _checkpointing(model):
    """Whether activation checkpointing is on in the model: a Hugging Face
    model's gradient_checkpointing_enable() (its is_gradient_checkpointing),
    or a block in torch's checkpoint_wrapper."""
    if model is None:
        return False
    inner = _unwrap(model)
    if getattr(inner, "is_gradient_checkpointing", False) is True:
        return True
    return any(type(m).__name__ == "CheckpointWrapper" for m in inner.modules())


def _describe_model(model):
    if model is None:
        return None
    inner = _unwrap(model)
    return {"class": f"{type(inner).__module__}.{type(inner).__qualname__}",
            "compiled": hasattr(model, "_orig_mod"), "training": bool(model.training)}


def _describe_optimizer(opt):
    groups = [{k: v for k, v in g.items() if k != "params" and isinstance(v, (int, float, bool, str, tuple))}
              for g in opt.param_groups]
    return {"class": f"{type(opt).__module__}.{type(opt).__qualname__}", "param_groups": groups}
