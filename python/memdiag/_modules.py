"""Where the forward's memory lives: the allocator's reading before and after
every module's forward, on one step, from global forward hooks.

A module's forward increment (its "mib") is allocated memory after its
forward minus before it: what it made and still holds, its children's
included (the tensors autograd saved for backward, its output). Its "own"
is that minus what its children's forwards added: the functional calls in
its own forward (an attention's softmax, a residual add, the loss a Hugging
Face model computes in its forward). PyTorch's MemTracker reads the same
thing (a module's memory after its forward minus before it) by counting
tensor storages through a dispatch mode; the allocator's counter needs no
dispatch and costs two readings a module call.

Tracked on the first micro-batch of steps 0 and 1 (step 1's replaces step
0's: the steady step; step 0's stands where the run ended in it, say out
of memory in its forward, with the modules that had finished by then). The
hooks are global from the model's forward to the step's backward, so a loss
module called in the loop (nn.CrossEntropyLoss) is counted as a module
outside the model. On the CPU the readings are marks on the probe's
profiler timeline, resolved when recording ends.

The same readings, each the allocation now and the peak since the one
before, also give the forward span by span (forward_profile()): between
two hook calls, what was allocated at the span's peak and at its end above
the forward's start, and the bytes of the tensors the span's module took
and gave (a leaf module's inputs and output; for the code of a module
between its children, that module's inputs). What a span freed before it
ended is a temporary; one far larger than those tensors is a workspace of
the kernel's own that does not grow with the batch (oneDNN's reordered
weight in a ResNet's convolutions on the CPU, about 9 MiB for layer4's at
any batch), which one run otherwise reads as growing.
"""
import time

from . import _inputs

MIB = float(1 << 20)
TRACKED_STEPS = (0, 1)
MAX_RECORDS = 200  # the largest by |mib|: a report stays small whatever the model
SPAN_CAP = 20000  # a forward of more spans is not profiled (the report's size)


def _bytes(x):
    return sum(t.numel() * t.element_size() for t in _inputs._tensors(x, 0, [0]))


class ModuleTracker:
    def __init__(self, model, read):
        """`read()`: the allocator's (allocated, peak since the last
        reading) now (CUDA) or a mark on the CPU probe's timeline resolved
        to the same (records(), forward_profile())."""
        self._read = read
        self._names = {}
        if model is not None:
            for name, m in model.named_modules(remove_duplicate=False):
                self._names.setdefault(id(m), name)
        self._handles = []
        self._stack = []  # (module, name, reading before, index of the call record)
        self._calls = []  # per call: [name, type, parent, before, after]
        self.step = None  # the step whose calls _calls holds
        self._done_step = None
        self._done_calls = []
        self._calls_all = []  # every call of the kept step, finished or not (parents index into it)
        self.ns = 0  # the hooks' own host time
        self.on_output = None  # on_output(name, type, output) after each call (KeptTracker.module_returned)
        # Every hook call of the forward in order: (call index, reading,
        # whether it is the call's end); per call, the bytes it took and gave.
        self._events = []
        self._in_bytes, self._out_bytes = [], []
        self.sizes = (None, None)  # the forward's (samples, tokens)
        self._done_events = self._done_in = self._done_out = None
        self._done_sizes = (None, None)
        self.failed = None  # why the readings stopped (a reading raised)

    def wants(self, step, micro):
        return step in TRACKED_STEPS and micro == 0 and not self._handles and not self.failed

    def begin(self, root, step, sizes=(None, None), root_inputs=()):
        """At the model's forward pre-hook: the model's own call is pushed
        here (a global hook installed now does not fire for the call in
        progress), its children's and the loop's modules from the hooks."""
        import torch.nn.modules.module as mm
        self._calls = []
        self._stack = []
        self._events, self._in_bytes, self._out_bytes = [], [], []
        self.step = step
        self.sizes = sizes
        if root is not None:
            try:
                self._push(root, root_inputs)
            except Exception as e:  # never the loop's failure
                self._fail(e)
                return
        self._handles.append(mm.register_module_forward_pre_hook(self._pre))
        self._handles.append(mm.register_module_forward_hook(self._post, always_call=True))

    def end(self, completed=True):
        """At backward (or where recording ends): the hooks come off. A
        completed forward's calls replace the last step's; an unfinished
        one's stand only where there was none before (the step that failed)."""
        for h in self._handles:
            h.remove()
        self._handles = []
        if not self._calls:
            return
        # A call still open (the forward failed inside it) has no after.
        finished = [c for c in self._calls if c[4] is not None]
        if completed or self._done_step is None:
            self._done_step, self._done_calls, self._calls_all = self.step, finished, self._calls
            self._done_events, self._done_in, self._done_out = (self._events, self._in_bytes, self._out_bytes) \
                if completed else (None, None, None)
            self._done_sizes = self.sizes
        self._calls, self._stack = [], []
        self._events, self._in_bytes, self._out_bytes = [], [], []

    def active(self):
        return bool(self._handles)

    def _pre(self, module, args):
        if self.failed:
            return
        t = time.perf_counter_ns()
        try:
            self._push(module, args)
        except Exception as e:  # never the loop's failure: the records are dropped
            self._fail(e)
        self.ns += time.perf_counter_ns() - t

    def _fail(self, error):
        self.failed = f"a reading failed: {type(error).__name__}: {error}"
        self._calls, self._stack, self._events = [], [], []
        self._done_calls, self._done_events = [], None

    def _push(self, module, args):
        parent = self._stack[-1][2] if self._stack else None
        reading = self._read()
        self._calls.append([self._names.get(id(module)), type(module).__name__, parent, reading, None])
        self._stack.append((module, None, len(self._calls) - 1))
        self._events.append((len(self._calls) - 1, reading, False))
        self._in_bytes.append(_bytes(args) if len(self._events) <= SPAN_CAP else 0)
        self._out_bytes.append(0)

    def _post(self, module, args, output):
        if self.failed:
            return
        t = time.perf_counter_ns()
        try:
            self._pop(module, output)
        except Exception as e:  # never the loop's failure
            self._fail(e)
        self.ns += time.perf_counter_ns() - t

    def _pop(self, module, output):
        if self._stack and self._stack[-1][0] is module:
            _, _, i = self._stack.pop()
            # always_call: a forward that raised (out of memory) calls this
            # with no output; the call is popped and left unfinished.
            if output is not None:
                self._calls[i][4] = reading = self._read()
                self._events.append((i, reading, True))
                if len(self._events) <= SPAN_CAP:
                    self._out_bytes[i] = _bytes(output)
                if self.on_output is not None:
                    call = self._calls[i]
                    self.on_output(call[0], call[1], output)

    def records(self, resolve=None):
        """The report's module records: per module (by qualified name; a
        module outside the model by its type), its forward increment, its
        own part (less its direct children's increments), its calls and
        the module whose forward called it."""
        if not self._done_calls:
            return None
        value = (lambda v: resolve(v)[0]) if resolve is not None else (lambda v: v[0])
        calls = self._done_calls
        if resolve is not None and any(resolve(c[3]) is None or resolve(c[4]) is None for c in calls):
            return None
        index = {id(c): i for i, c in enumerate(calls)}
        deltas = [value(c[4]) - value(c[3]) for c in calls]
        children = [0] * len(calls)
        for i, c in enumerate(calls):
            if c[2] is not None and c[2] < len(self._calls_all):
                p = index.get(id(self._calls_all[c[2]]))
                if p is not None:
                    children[p] += deltas[i]
        by_key = {}
        for i, (name, kind, parent, _, _) in enumerate(calls):
            key = (name, kind if name is None else None)
            r = by_key.get(key)
            if r is None:
                parent_name = self._calls_all[parent][0] if parent is not None else None
                r = by_key[key] = {"name": name, "type": kind, "parent": parent_name,
                                   "mib": 0.0, "own_mib": 0.0, "calls": 0}
            r["mib"] += deltas[i] / MIB
            r["own_mib"] += (deltas[i] - children[i]) / MIB
            r["calls"] += 1
        out = sorted(by_key.values(), key=lambda r: -abs(r["mib"]))[:MAX_RECORDS]
        for r in out:
            r["mib"] = round(r["mib"], 9)
            r["own_mib"] = round(r["own_mib"], 9)
        return {"step": self._done_step, "modules": out}

    def forward_profile(self, resolve=None):
        """The kept step's completed forward span by span: {step, samples,
        tokens, start_mib, names, rise_mib, held_mib, operands_mib}, or
        None (no completed forward, too many spans, a reading unresolved)."""
        events = self._done_events
        if not events or len(events) < 2 or len(events) > SPAN_CAP or not self._done_sizes[0]:
            return None
        value = resolve or (lambda v: v)
        readings = [value(r) for _, r, _ in events]
        if any(r is None for r in readings):
            return None
        start = readings[0][0]
        names, rise, held, operands = [], [], [], []
        open_calls = [events[0][0]]
        for k in range(1, len(events)):
            i, _, is_end = events[k]
            before, _, before_end = events[k - 1]
            if is_end and not before_end and before == i:  # a module that called none: its own span
                span_bytes = self._done_in[i] + self._done_out[i]
                owner = i
            else:  # the code of the module around it, between its children
                owner = open_calls[-1] if open_calls else i
                span_bytes = self._done_in[owner] + (self._done_out[owner] if is_end and owner == i else 0)
            names.append(self._calls_all[owner][1])
            live, peak = readings[k]
            rise.append(round((max(live, peak) - start) / MIB, 6))
            held.append(round((live - start) / MIB, 6))
            operands.append(round(span_bytes / MIB, 6))
            if is_end:
                if open_calls and open_calls[-1] == i:
                    open_calls.pop()
            else:
                open_calls.append(i)
        samples, tokens = self._done_sizes
        out = {"step": self._done_step, "samples": samples, "start_mib": round(start / MIB, 6), "names": names,
               "rise_mib": rise, "held_mib": held, "operands_mib": operands}
        if tokens:
            out["tokens"] = tokens
        return out
