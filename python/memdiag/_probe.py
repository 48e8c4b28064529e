"""Memory readings at phase boundaries: the same figures memory_diagnostics
takes, read through torch's own Python API.

CUDA: the caching allocator's statistics (allocated, reserved, the peak since
the phase began, bytes stranded in split blocks, retries) and
cudaMemGetInfo for the whole device.

CPU: PyTorch keeps no allocated counter for the CPU that Python can read, so
the CPU probe runs PyTorch's profiler with memory profiling on: its
allocator reports every allocation and free made while it runs, and the
probe adds them up in time order against zero-length marks it leaves at
each phase boundary. What existed before recording began (the model, the
optimizer's state) is counted from the tensors themselves; a free of such a
tensor is not reported, so the CPU's allocated can only overstate; so does
a free made in a thread the profiler does not follow (Gloo's, under a
process group of several ranks: the report says so). The CPU
probe is for trying the recorder out and for tests; CUDA is what it is for.
"""
import os
import time

import torch

MIB = float(1 << 20)


def _mib(nbytes):
    return nbytes / MIB


class CudaProbe:
    kind = "cuda"
    _carried_peak = 0  # see __init__

    def __init__(self, device):
        self.device = torch.device(device)
        if self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self._nvml = _nvml_handle(self.device.index)
        self._nvml_used_at = None  # the device's used bytes when NVML was last asked
        self._nvml_last = None
        self._index = self.device.index
        self._mem_get_info = torch.cuda.cudart().cudaMemGetInfo
        self._used = None         # the device's used bytes at the last cudaMemGetInfo
        self._used_reserved = None  # the allocator's reserved bytes then
        # The phase's peak before the last segment() reset it (a profiled
        # backward's nodes): the phase's reading takes the higher.
        self._carried_peak = 0
        # The allocator's figures in one native call where it could be built
        # (memdiag/_native.py), else torch's Python API: the same numbers.
        from . import _native
        self.native = _native.load()
        self.native_why = _native.why()

    def sync(self):
        torch.cuda.synchronize(self.device)

    def begin_phase(self):
        self._carried_peak = 0
        torch._C._cuda_resetPeakMemoryStats(self._index)

    def segment(self):
        """(allocated, peak since the last segment) in bytes, now; the
        phase's peak goes on (it is carried into the phase's reading)."""
        if self.native is not None:
            allocated, peak = self.native.read(self._index, True, False)[:2]
        else:
            allocated = torch.cuda.memory_allocated(self._index)
            peak = torch.cuda.max_memory_allocated(self._index)
            torch._C._cuda_resetPeakMemoryStats(self._index)
        self._carried_peak = max(self._carried_peak, peak)
        return (allocated, peak)

    @staticmethod
    def resolve_segment(reading):
        return reading

    def evaluation_begin(self):
        """An evaluation's forward starts (a forward of the model that
        trains nothing, memdiag/_recorder.py): the phase's peak so far is
        carried into its reading and the allocator's peak reset, so that
        what the evaluation reaches is not the phase's. Returns the bytes
        allocated now."""
        return self.segment()[0]

    def evaluation_end(self):
        """The evaluation's forward ended: the peak since evaluation_begin()
        in bytes, read and reset, and not carried (the phase's own peak
        goes on from what is allocated now)."""
        if self.native is not None:
            return self.native.read(self._index, True, False)[1]
        peak = torch.cuda.max_memory_allocated(self._index)
        torch._C._cuda_resetPeakMemoryStats(self._index)
        return peak

    def evaluation_undo(self, peaks):
        """Forwards read as an evaluation's were a training forward after
        all (a model trained in eval() mode: backward followed): their
        peaks (bytes, from evaluation_end) are the phase's again."""
        self._carried_peak = max(self._carried_peak, *peaks) if peaks else self._carried_peak

    def allocated_mib(self):
        return _mib(torch.cuda.memory_allocated(self.device))

    def peak_mib(self):
        return _mib(torch.cuda.max_memory_allocated(self.device))

    def read(self, sync=True, process=True, device=True):
        """The sample's memory fields (figures(), named)."""
        allocated, reserved, used, peak, inactive, process_mib, retries = self.figures(sync, process, device)
        return {
            "allocated_mib": allocated,
            "reserved_mib": reserved,
            "device_used_mib": used,
            "peak_allocated_mib": peak,
            "inactive_split_mib": inactive,
            "process_device_mib": process_mib,
            "alloc_retries": retries,
        }

    def figures(self, sync, process, device, reset_peak=False):
        """(allocated, reserved, device used, peak allocated, inactive
        split: MiB; this process's MiB or None; allocation retries). The
        caching allocator's statistics are host-side and in program order,
        exact without a device synchronisation; `sync` waits for the device
        first (for a phase's time). `process`: this process's MiB from NVML
        too. NVML's call costs more than the rest of a reading (29 us on the
        H200, 620 us on an H100's host), and this process's use can only
        move when the device's used memory moves, so NVML is asked only when
        cudaMemGetInfo's figure differs from the one at the last NVML
        reading, and then only where the device's use is asked for too
        (`device`: every phase of the first steps, then every tenth step's
        end); otherwise the last reading stands where the device's use has
        not moved since, and where it has the figure is None (not read): a
        job whose reserve grows every step (a leak) paid two NVML calls a
        step, 1.2 ms on that host. `device`: ask cudaMemGetInfo (about 25 us in a
        training loop on the H200, as much as the allocator's statistics);
        otherwise its last figure, moved by as much as the allocator's
        reserved bytes moved since, the way the device's use moves in a
        steady loop (the recorder asks at every phase of the first steps,
        where libraries make their memory outside the allocator, and at
        every tenth step's end after them). Asking wherever the reserve
        moved cost a workload whose reserve moved at two phases a step
        (gamma small on an H100, docs/measurements/h100-s62) two
        cudaMemGetInfo calls a step, 44 us each: 3.5% of its 2.5 ms step. `reset_peak`: the peak starts again
        from allocated, after the reading (what begin_phase() does), in the
        same call."""
        if sync:
            self.sync()
        native = self.native
        if native is not None:
            allocated, peak, reserved, inactive, retries, used_now = native.read(
                self._index, reset_peak, device or self._used is None)
            if used_now >= 0:
                self._used, self._used_reserved = used_now, reserved
            elif reserved != self._used_reserved:
                self._used, self._used_reserved = self._used + reserved - self._used_reserved, reserved
        else:
            # The nested form, as the allocator keeps it: memory_stats()
            # flattens it into a new dict on every call. cudaMemGetInfo
            # straight from torch's binding: torch.cuda.mem_get_info() spends
            # as long again normalising the device argument.
            s = torch._C._cuda_memoryStats(self._index)
            reserved = s["reserved_bytes"]["all"]["current"]
            if device or self._used is None:
                free, total = self._mem_get_info(self._index)
                self._used, self._used_reserved = total - free, reserved
            elif reserved != self._used_reserved:
                self._used, self._used_reserved = self._used + reserved - self._used_reserved, reserved
            allocated, peak = s["allocated_bytes"]["all"]["current"], s["allocated_bytes"]["all"]["peak"]
            inactive, retries = s["inactive_split_bytes"]["all"]["current"], s["num_alloc_retries"]
            if reset_peak:
                torch._C._cuda_resetPeakMemoryStats(self._index)
        if self._carried_peak:
            peak = max(peak, self._carried_peak)
            self._carried_peak = 0
        used = self._used
        process_mib = None
        if process:
            if used == self._nvml_used_at:
                process_mib = self._nvml_last
            elif device or self._nvml_used_at is None:
                self._nvml_last = process_mib = self._process_mib()
                self._nvml_used_at = used
        return (allocated / MIB, reserved / MIB, used / MIB, peak / MIB, inactive / MIB, process_mib, retries)

    def _process_mib(self):
        if self._nvml is None:
            return None
        try:
            import os
            import pynvml
            for p in pynvml.nvmlDeviceGetComputeRunningProcesses(self._nvml):
                if p.pid == os.getpid() and p.usedGpuMemory is not None:
                    return _mib(p.usedGpuMemory)
        except Exception:  # NVML is optional: no figure rather than a failed run
            return None
        return None

    def oom_state(self, request_bytes=None):
        """The allocator's state when a request failed (called from the
        out-of-memory observer, before the exception is raised)."""
        s = torch.cuda.memory_stats(self.device)
        free, total = torch.cuda.mem_get_info(self.device)
        fraction = _memory_fraction(self.device)
        largest = 0
        try:
            # Cached free blocks only: what a request could have reused.
            for seg in torch.cuda.memory_snapshot():
                if seg.get("device") != self.device.index:
                    continue
                for b in seg.get("blocks", []):
                    if b.get("state") == "inactive":
                        largest = max(largest, b.get("size", 0))
        except Exception:
            largest = None
        return {
            "request_mib": None if request_bytes is None else _mib(request_bytes),
            "limit_mib": _mib(total) * (fraction if fraction is not None else 1.0),
            "device_free_mib": _mib(free),
            "allocated_mib": _mib(s.get("allocated_bytes.all.current", 0)),
            "reserved_mib": _mib(s.get("reserved_bytes.all.current", 0)),
            "inactive_split_mib": _mib(s.get("inactive_split_bytes.all.current", 0)),
            "inactive_split_blocks": int(s.get("inactive_split.all.current", 0)),
            "largest_free_block_mib": None if largest is None else _mib(largest),
            "num_alloc_retries": int(s.get("num_alloc_retries", 0)),
            "num_ooms": int(s.get("num_ooms", 0)) + 1,  # the counter moves after the observers ran
        }

    def environment(self):
        props = torch.cuda.get_device_properties(self.device)
        return {
            "device_name": props.name,
            "device_total_mib": _mib(props.total_memory),
            "cuda_runtime_version": torch.version.cuda,
            "driver_version": _driver_version(),
        }

    def memory_limit_mib(self):
        fraction = _memory_fraction(self.device)
        if fraction is None or fraction >= 1.0:
            return None
        return _mib(torch.cuda.get_device_properties(self.device).total_memory) * fraction


def limit_memory(mib, device=None):
    """Caps this process's share of a CUDA device at `mib` MiB, as a smaller
    GPU would (torch.cuda.set_per_process_memory_fraction); the recorder
    reports it as the run's memory limit."""
    device = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())  # fractions are per device index
    total = torch.cuda.get_device_properties(device).total_memory / MIB
    torch.cuda.set_per_process_memory_fraction(min(1.0, mib / total), device)
    return device


def _memory_fraction(device):
    try:
        return float(torch.cuda.get_per_process_memory_fraction(device))
    except Exception:
        return None


def _nvml_handle(index):
    try:
        import pynvml
        pynvml.nvmlInit()
        return pynvml.nvmlDeviceGetHandleByIndex(index)
    except Exception:
        return None


def _driver_version():
    try:
        import pynvml
        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:
        return None


# The CPU allocator's reporter knows the size of a block made while a
# memory profiler ran, and the profiler reports its free, in that window or
# a later one; of a block made while none ran it reports no free ("Memory
# block of unknown size was allocated before the profiling started"). A
# weight made before recording whose storage a loop replaces (SAM's
# p.data = old_p) stayed counted, and every later figure read one weight
# copy too high (an independent check's: 32.17 MiB for 16.09 of weights).
# So a probe looks at the lifetimes of the storages it starts with, except
# those an earlier probe's profiler saw made (kept here at its end, by data
# pointer: (weak reference, bytes)). Not covered: the reporter keeps the
# size of a block made while profiling and freed while not; a block made
# later at the same address, unprofiled, is then reported freed with that
# size and taken off here as well (two recordings in one process with the
# loop running unrecorded between them, where the second frees weights
# made between them), and a block made under a profiler of the loop's own
# before recording.
_PROFILED = {}
_TRACKED_MOST = 5000  # the largest storages, where a process holds more


def _cpu_storages(tensors):
    """{data pointer: (storage, bytes)} of the CPU storages among tensors."""
    out = {}
    for t in tensors:
        try:
            storage = t.untyped_storage()
            ptr, nbytes = storage.data_ptr(), storage.nbytes()
        except (RuntimeError, NotImplementedError, AttributeError):
            continue
        if ptr != 0 and ptr not in out and storage.device.type == "cpu":
            out[ptr] = (storage, nbytes)
    return out


class CpuProbe:
    """Allocated and peak on the CPU from the profiler's memory events.

    Host memory stays bounded whatever the job's length: the profiler keeps
    every event it collects until it stops (about 2 KiB each, and a training
    step makes one per allocation and free), so the probe stops and
    restarts it every few steps, folding each window's events into the
    running figures and keeping, per mark, only (allocated, peak). The
    window is sized to hold about WINDOW_EVENTS events (about 40 MiB).
    Nothing is lost between windows: the CPU allocator's reporter keeps the
    size of every block made while memory profiling was on, so a free in a
    later window is still reported, and nothing runs between the stop and
    the restart.

    Only user-scope ranges are recorded (the probe's marks, and the loop's
    own record_function ranges), not every operator: the memory events come
    through either way, and the operators' are most of the rest.

    A profiler of the loop's own: torch allows one at a time, so while the
    loop's is on the probe's is paused, and the probe reads the loop's own
    events when it stops (it gets them intact); without profile_memory the
    loop's profiler has no memory events, and the window is said to be
    unmeasured."""

    kind = "cpu"
    WINDOW_EVENTS = 20_000

    def __init__(self, existing_bytes, existing=()):
        """existing: the live tensors counted in existing_bytes."""
        from torch.multiprocessing.reductions import StorageWeakRef
        self.device = torch.device("cpu")
        self._live = self._peak = existing_bytes
        # Of the storages counted at the start, those whose free the
        # profiler does not report (_PROFILED says why): looked at at each
        # mark, and one gone is taken off the figures there (by mark, until
        # the window is folded).
        for ptr in [p for p, (ref, _) in _PROFILED.items() if ref.expired()]:
            del _PROFILED[ptr]
        self._start = {}  # data pointer: weak reference, every storage counted at the start
        tracked = []
        for ptr, (storage, nbytes) in _cpu_storages(existing).items():
            ref = StorageWeakRef(storage)
            self._start[ptr] = ref
            known = _PROFILED.get(ptr)
            if not (known is not None and known[1] == nbytes):
                tracked.append((ref, nbytes))
        tracked.sort(key=lambda r: -r[1])
        self._unreported = tracked[:_TRACKED_MOST]
        self._unseen = {}
        self._segment_peak = existing_bytes  # since the last segment mark (a profiled backward's nodes)
        # The phase's peak when an evaluation's forward began (put by while
        # it runs), and per undo mark the evaluation ends whose peaks go
        # back to the phase (evaluation_undo).
        self._phase_peak_before = existing_bytes
        self._undo = {}
        self._readings = {}
        self._marks = 0
        self._on = False
        self._started = False
        self._steps_in_window = 0
        self._window_steps = 1  # the first window: one step, to learn a step's events
        self.notes = []
        self._below_zero = False
        # A memory event larger than the host's memory is no allocation of
        # this process (a CI run read a cleanup 21800752 MiB up once, in a
        # job that held 48 MiB): left out, with a note.
        try:
            self._absurd_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            self._absurd_bytes = 1 << 50
        self._absurd_seen = False
        self._theirs = None  # the loop's own profiler's config while it runs
        self._patched = None

    # ----- the profiler's state ----------------------------------------------

    def start(self):
        if torch.autograd._profiler_enabled():
            self.notes.append("the CPU's figures need PyTorch's profiler and one of the loop's own was already "
                              "running when recording began: CPU allocated and peak are not measured")
            return
        self._started = True
        self._patch()
        self._enable()

    def _enable(self):
        import os
        from torch._C._autograd import _enable_profiler, _prepare_profiler
        from torch._C._profiler import ProfilerActivity, ProfilerConfig, ProfilerState, RecordScope, _ExperimentalConfig
        # Kineto, initialised by the first profile, logs nothing below a
        # fatal error (a CUDA build on a machine without a GPU logs its
        # failed device count).
        quiet = "KINETO_LOG_LEVEL" not in os.environ
        if quiet:
            os.environ["KINETO_LOG_LEVEL"] = "5"
        try:
            config = ProfilerConfig(ProfilerState.KINETO, False, True, False, False, False, _ExperimentalConfig(), "")
            _prepare_profiler(config, {ProfilerActivity.CPU})
            _enable_profiler(config, {ProfilerActivity.CPU}, {RecordScope.USER_SCOPE})
            self._on = True
        finally:
            if quiet:
                os.environ.pop("KINETO_LOG_LEVEL", None)

    def _disable(self):
        """Stops the probe's profiler and folds its window in; returns the window's events."""
        from torch._C._autograd import _disable_profiler
        self._on = False
        return self._fold(_disable_profiler().events())

    def _fold(self, events):
        """Adds a window's memory events to the running figures, in time
        order, reading them at each mark."""
        timeline = []
        for e in events:
            name = e.name()
            if name == "[memory]":
                nbytes = e.nbytes()
                if abs(nbytes) > self._absurd_bytes:
                    if not self._absurd_seen:
                        self.notes.append(f"the profiler reported a memory event of {nbytes} bytes, more than the "
                                          "host has: left out of the CPU's figures")
                        self._absurd_seen = True
                    continue
                timeline.append((e.start_ns(), 1, nbytes))
            elif name.startswith("memdiag.mark."):
                timeline.append((e.start_ns(), 0, int(name.rsplit(".", 1)[1])))
            elif name.startswith("memdiag.point."):
                timeline.append((e.start_ns(), -1, int(name.rsplit(".", 1)[1])))
            elif name.startswith("memdiag.segment."):
                timeline.append((e.start_ns(), -2, int(name.rsplit(".", 1)[1])))
            elif name.startswith("memdiag.eval"):
                kind = {"memdiag.evalbegin": -3, "memdiag.evalend": -4, "memdiag.evalundo": -5}.get(
                    name.rsplit(".", 1)[0])
                if kind is not None:
                    timeline.append((e.start_ns(), kind, int(name.rsplit(".", 1)[1])))
        # A mark and a memory event at the same instant: the mark first (the
        # boundary was crossed before the next phase allocated).
        timeline.sort(key=lambda t: (t[0], t[1]))
        live, peak, segment_peak = self._live, self._peak, self._segment_peak
        for _, kind, value in timeline:
            if kind == 1:
                live += value
                if live < 0:  # more freed than was counted: a reading no report can hold
                    if not self._below_zero:
                        self.notes.append("the CPU's allocated fell below zero (frees the profiler reported of "
                                          "memory made before recording, not counted at its start): read as 0")
                        self._below_zero = True
                    live = 0
                peak = max(peak, live)
                segment_peak = max(segment_peak, live)
            elif kind == 0:
                live = max(0, live - self._unseen.pop(value, 0))
                self._readings[value] = (live, peak)
                peak = live
            elif kind == -1:  # a point inside a phase: read, the phase's peak goes on
                live = max(0, live - self._unseen.pop(value, 0))
                self._readings[value] = (live, peak)
            elif kind == -2:  # a segment: read with the peak since the last one; the phase's goes on
                self._readings[value] = (live, segment_peak)
                segment_peak = live
            elif kind == -3:  # an evaluation starts: its peak is its own, the phase's is put by
                self._readings[value] = (live, live)
                self._phase_peak_before = peak
                peak = live
            elif kind == -4:  # it ended: read its peak; the phase's goes on from before it
                self._readings[value] = (live, peak)
                peak = max(self._phase_peak_before, live)
            else:  # its forwards were a training forward after all: their peaks are the phase's again
                ends = self._undo.pop(value, ())
                peak = max([peak] + [self._readings[m][1] for m in ends if m in self._readings])
        self._live, self._peak, self._segment_peak = live, peak, segment_peak
        return len(events)

    def end_step(self):
        """At a step's end: a new window when this one holds about
        WINDOW_EVENTS events."""
        if not self._on:
            return
        self._steps_in_window += 1
        if self._steps_in_window < self._window_steps:
            return
        n = self._disable()
        self._enable()
        per_step = max(1, n // self._steps_in_window)
        self._window_steps = max(1, min(1000, self.WINDOW_EVENTS // per_step))
        self._steps_in_window = 0

    def stop(self, live=()):
        """Stops the profiler; returns, per mark in order, (allocated, peak
        since the previous mark) in bytes. live: the tensors alive now,
        whose storages made while it ran a later probe need not look at."""
        from torch.multiprocessing.reductions import StorageWeakRef
        if self._on:
            self._disable()
        for ptr, (storage, nbytes) in _cpu_storages(live).items():
            ref = self._start.get(ptr)
            if ref is None or ref.expired():  # made since the start (where one of then was freed, in its place)
                _PROFILED[ptr] = (StorageWeakRef(storage), nbytes)
        self._start = {}
        self._unpatch()
        if self._theirs is not None:
            self.notes.append("the loop's own profiler was still running when recording ended: the CPU's figures "
                              "after it started are not measured")
        fallback = (self._live, self._peak)
        return [self._readings.get(i, fallback) for i in range(self._marks)]

    # ----- a profiler of the loop's own --------------------------------------

    def _patch(self):
        """Wraps torch.autograd.profiler's calls that start and stop a
        profiler (torch.profiler.profile and torch.autograd.profiler.profile
        both go through them) so that the loop's own can run."""
        import torch.autograd.profiler as ap
        names = ("_prepare_profiler", "_enable_profiler", "_disable_profiler")
        originals = {n: getattr(ap, n) for n in names}
        probe = self

        def prepare(config, activities, *rest):
            probe._pause_for(config)
            return originals["_prepare_profiler"](config, activities, *rest)

        def enable(config, activities, *rest):
            probe._pause_for(config)
            return originals["_enable_profiler"](config, activities, *rest)

        def disable(*args):
            result = originals["_disable_profiler"](*args)
            probe._resume_from(result)
            return result

        for n, f in zip(names, (prepare, enable, disable)):
            setattr(ap, n, f)
        self._patched = (ap, originals)

    def _unpatch(self):
        if self._patched is not None:
            ap, originals = self._patched
            for n, f in originals.items():
                setattr(ap, n, f)
            self._patched = None

    def _pause_for(self, config):
        if self._on:
            self._disable()
        self._theirs = config

    def _resume_from(self, result):
        if self._theirs is None:
            return
        # Its config cannot be read back from Python: its events say whether
        # it profiled memory (a window of a training loop allocates).
        try:
            events = result.events()
        except Exception:
            events = []
        self._fold(events)  # without memory events, its marks read the figures as they stood
        if not any(e.name() == "[memory]" for e in events):
            self.notes.append("the loop's own profiler ran without profile_memory: the CPU's allocated and peak "
                              "do not see what was allocated or freed while it ran")
        self._theirs = None
        if self._started and self._patched is not None:
            self._enable()

    # ----- marks -------------------------------------------------------------

    def mark(self):
        """Leaves a zero-length mark on the profiler's timeline; returns its number."""
        n = self._marks
        self._marks += 1
        self._look_unreported(n)
        with torch.profiler.record_function(f"memdiag.mark.{n}"):
            pass
        return n

    def _look_unreported(self, n):
        """Takes off, at mark n, the storages of before recording freed
        since the last look (the phase's peak keeps them: they lived in
        it)."""
        if not self._unreported:
            return
        kept, gone = [], 0
        for ref, nbytes in self._unreported:
            if ref.expired():
                gone += nbytes
            else:
                kept.append((ref, nbytes))
        if gone:
            self._unreported = kept
            self._unseen[n] = gone

    def point(self):
        """A mark that reads the allocated bytes and leaves the phase's
        peak running (the forward's per-module readings)."""
        n = self._marks
        self._marks += 1
        self._look_unreported(n)
        with torch.profiler.record_function(f"memdiag.point.{n}"):
            pass
        return n

    def segment(self):
        """A mark read as (allocated, peak since the last segment) when
        recording ends (resolve_segment); the phase's peak goes on."""
        n = self._marks
        self._marks += 1
        with torch.profiler.record_function(f"memdiag.segment.{n}"):
            pass
        return n

    def resolve_segment(self, n):
        return self._readings.get(n)

    def _named_mark(self, prefix):
        n = self._marks
        self._marks += 1
        with torch.profiler.record_function(f"{prefix}.{n}"):
            pass
        return n

    def evaluation_begin(self):
        """An evaluation's forward starts (a forward of the model that
        trains nothing): a mark read as the allocated bytes then; from it
        to evaluation_end()'s mark the phase's peak is put by, and what the
        evaluation reaches is read apart. Returns the mark."""
        return self._named_mark("memdiag.evalbegin")

    def evaluation_end(self):
        """The evaluation's forward ended: a mark read as (allocated, the
        peak since evaluation_begin); the phase's peak goes on from the
        higher of its own before the evaluation and what is allocated now.
        Returns the mark."""
        return self._named_mark("memdiag.evalend")

    def evaluation_undo(self, ends):
        """Forwards read as an evaluation's were a training forward after
        all (backward followed): the peaks read at their end marks are the
        phase's again, from here on the timeline."""
        n = self._named_mark("memdiag.evalundo")
        self._undo[n] = list(ends)
        return n

    def sync(self):
        pass

    def begin_phase(self):
        pass

    def oom_state(self, request_bytes=None):
        return None

    def environment(self):
        return {"device_name": "cpu", "device_total_mib": None, "cuda_runtime_version": None, "driver_version": None}

    def memory_limit_mib(self):
        return None


class HostReader:
    """The host at a phase's end, the figures memory_diagnostics reads
    there: this process's resident set (/proc/self/statm: its heap, pinned
    buffers, mapped libraries) and, on CUDA, the page-locked bytes PyTorch's
    host allocator holds, in use or cached (pinned copies, offloaded state).
    statm is read with one pread of a file kept open (about 6 us on this
    project's 2-core machine) and parsed only when the report is written;
    the recorder asks where it asks for the device's use."""

    def __init__(self, native=None):
        """native: the native reading's module, whose host_figures reads
        both figures in one call (the pinned bytes from Python build a dict
        of every host statistic, 13 us a step on the H200)."""
        self._native = getattr(native, "host_figures", None)
        self._page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
        try:
            self._fd = os.open("/proc/self/statm", os.O_RDONLY)
        except OSError:  # not Linux: no resident set in the report
            self._fd = None

    def read(self, pinned):
        """(statm's text, or the resident pages natively, or None; pinned
        bytes or None). `pinned`: ask the host allocator too (natively where
        built, else a dict of its statistics built in Python); its bytes
        grow only when a pinned block is made and fall only at its
        empty_cache, so a reading at each step's end holds the step's most."""
        if self._native is not None:
            try:
                pages, held = self._native(-1 if self._fd is None else self._fd, bool(pinned))
                return (pages if pages >= 0 else None), (held if held >= 0 else None)
            except Exception:  # the reading below
                self._native = None
        statm = None
        if self._fd is not None:
            try:
                statm = os.pread(self._fd, 128, 0)
            except OSError:
                statm = None
        held = None
        if pinned:
            try:
                held = torch._C._cuda_hostMemoryStats()["allocated_bytes"]["current"]
            except Exception:  # an older torch without host statistics
                held = None
        return statm, held

    def resident_mib(self, statm):
        """MiB resident from statm's text (its second field, in pages), or
        from the pages the native reading parsed."""
        pages = statm if isinstance(statm, int) else int(statm.split()[1])
        return pages * self._page / MIB

    def close(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def now_ms():
    return time.perf_counter() * 1000.0
