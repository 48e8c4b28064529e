"""Backward's memory, node by node, at one step: what is allocated above
backward's start at the peak of each autograd node, and how much of it is
the parameters' gradients.

Why: a job's largest batch is bounded where memory peaks, and in a
training step that is usually inside backward, after some weight gradients
are made and before the activations they belong to are freed. Of what
backward holds there, the gradients do not grow with the batch and the
rest (the activations still saved, the gradients of activations in
flight) does. From phase boundaries alone the two cannot be told apart:
backward's rise above its start was scaled with the batch whole, which put
ResNet-50's layer4 gradients (58 MiB) at 3.6 MiB a sample and its largest
batch at 69 where 105 fits; and a wide MLP's first weight gradient (8 MiB,
made while every activation is held) was left out, putting its batch 15%
over the budget (docs/measurements/cpu/capacity-check-s62).

How: before one backward runs, a post hook is put on every node of its
graph and a post-accumulate hook on every parameter. Each reads the
probe's allocated bytes and the peak since the hook before (a CUDA reading
resets the allocator's peak and carries the phase's; on the CPU a mark on
the profiler's timeline, read when recording ends). The gradient bytes at
each node are those already accumulated into a parameter whose gradient
was unset at backward's start, plus those in flight to one: a node's
outputs that reach an AccumulateGrad through nodes of one input (a
Linear's weight gradient passes a TBackward0, autocast's a ToCopyBackward0),
counted once per storage. Hooks on AccumulateGrad nodes themselves are not
used: a post hook keeps the incoming gradient referenced, and the node then
copies it instead of taking it.

Each reading also keeps what was allocated when the node was done and the
bytes of the batch's gradients it took and gave (its outputs to no
parameter, and its incoming gradient unless the node is on a weight's way
to its AccumulateGrad, weight-shaped throughout):
what the node freed before it was done is a temporary, and one far larger
than those gradients is a workspace of the kernel's own that does not grow
with the batch (ConvNeXt's depthwise convolutions on the CPU: 36.9 MiB
beside 0.24 MiB at batch 4 and 8 alike), where one of their size may.

Cost, once a job: a reading and a few dictionary operations per node (a
ResNet-50 has 339 nodes, GPT-2 small about 1500)."""
import torch

MIB = float(1 << 20)
NODE_CAP = 20000  # a larger graph is not profiled (the hooks' cost, the report's size)
_CHAIN_DEPTH = 8  # one-input nodes followed from an output to its AccumulateGrad


def _walk(root, cap):
    seen, todo, out = set(), [root], []
    while todo:
        fn = todo.pop()
        if fn is None or id(fn) in seen:
            continue
        seen.add(id(fn))
        out.append(fn)
        if len(out) > cap:
            return None
        todo.extend(f for f, _ in fn.next_functions)
    return out


def _only_next(fn):
    """The node's one next node, where it has one input (a view, a
    transpose, a dtype cast); None otherwise. One input, not one that needs
    a gradient: a convolution whose input needs none (a GAN's detached
    fake images) passes its weight's gradient alone, and through it the
    gradient of its output, batch-sized, was read as on its way to that
    weight (a discriminator's 4.0 MiB at batch 64, fixed memory to the
    capacity model, whose answer was 5-9% over the budget)."""
    nxt = fn.next_functions
    return nxt[0][0] if len(nxt) == 1 else None


def _accumulates(fn):
    """The AccumulateGrad an edge's gradient reaches through nodes of one
    input (a view, a transpose, a dtype cast), or None."""
    for _ in range(_CHAIN_DEPTH):
        if fn is None:
            return None
        if type(fn).__name__ == "AccumulateGrad":
            return fn
        fn = _only_next(fn)
    return None


class BackwardProfile:
    """Hooks one backward; readings(): the profile, once it ran and the
    probe's marks are resolved."""

    def __init__(self, root, parameters, probe, step, samples, tokens=None):
        self._probe = probe
        self.step, self.samples, self.tokens = step, samples, tokens
        self._handles = []
        # per node: (probe reading, gradient bytes, node type, the bytes of
        # the gradients it took and gave)
        self._readings = []
        self.why_not = None
        self.done = False  # the backward hooked ran to its end
        nodes = _walk(root, NODE_CAP)
        if nodes is None:
            self.why_not = f"its graph has more than {NODE_CAP} nodes"
            return
        # Sharded parameters (FSDP2's DTensors): their gradients are made
        # and reduced by the library's own hooks, a unit at a time, and the
        # capacity model reads a sharded run otherwise.
        if any(hasattr(p, "_local_tensor") for p in parameters):
            self.why_not = "its parameters are sharded (DTensor)"
            return
        # The parameters whose gradient backward makes (unset at its start).
        unset = {id(p) for p in parameters if p.grad is None}
        # Gradients in flight are to these: an input that requires grad (a
        # gradient penalty's interpolates) has an AccumulateGrad too, whose
        # gradient is no parameter's, and an entry for it would never be
        # taken off (no post-accumulate hook is on it) and would keep its
        # node, and through it the input and its gradient, alive (an
        # independent check's WGAN-GP: two batches, 3 MiB at 32 samples).
        ids = {id(p) for p in parameters}
        # node -> [(output index, the node it goes to, the parameter it is for)]
        edges = {}
        for fn in nodes:
            if type(fn).__name__ == "AccumulateGrad":
                continue
            for k, (f, _) in enumerate(fn.next_functions):
                acc = _accumulates(f) if f is not None else None
                if acc is not None and id(getattr(acc, "variable", None)) in ids:
                    edges.setdefault(fn, []).append((k, f, id(getattr(acc, "variable", None))))
        # The nodes on a gradient's way to its parameter (a weight's
        # TBackward0, autocast's ToCopyBackward0): weight-shaped throughout.
        chains = set()
        for out_edges in edges.values():
            for _, f, _ in out_edges:
                while f is not None and type(f).__name__ != "AccumulateGrad":
                    chains.add(f)
                    f = _only_next(f)
        self._made = 0  # bytes accumulated into unset gradients so far
        # Gradients on their way to a parameter: the node they go to next ->
        # {storage address: (bytes, the parameter's id)}.
        self._in_flight = {}
        try:
            self._start = probe.segment()
        except Exception as e:  # never the loop's failure: nothing is hooked
            self.why_not = f"a reading failed: {type(e).__name__}: {e}"
            return
        for fn in nodes:
            if type(fn).__name__ != "AccumulateGrad":
                self._handles.append(fn.register_hook(self._node_hook(fn, edges.get(fn, ()), fn in chains)))
        self._unset = unset
        seen = set()
        for p in parameters:
            if p.requires_grad and id(p) not in seen:
                seen.add(id(p))
                self._handles.append(p.register_post_accumulate_grad_hook(self._accumulated))

    def _node_hook(self, fn, chain_edges, weights_only):
        name = type(fn).__name__
        # The gradients of what the batch flows through: the node's
        # outputs that go to no parameter, and its incoming gradient unless
        # the node is on a gradient's way to its parameter (weights_only).
        to_parameters = {k for k, _, _ in chain_edges}
        defined = {k for k, (f, _) in enumerate(fn.next_functions) if f is not None}
        batch_outputs = () if weights_only else tuple(sorted(defined - to_parameters))

        def hook(grad_inputs, grad_outputs):
            if self.why_not is not None:
                return
            try:
                self._node_read(fn, chain_edges, grad_inputs, () if weights_only else grad_outputs,
                                batch_outputs, name)
            except Exception as e:  # never the loop's failure: the profile is dropped
                self._fail(e)
        return hook

    def _fail(self, error):
        self.why_not = f"a reading failed: {type(error).__name__}: {error}"
        self._readings = []

    def _node_read(self, fn, chain_edges, grad_inputs, incoming, batch_outputs, name):
        out = {}
        for k, consumer, param in chain_edges:
            t = grad_inputs[k] if k < len(grad_inputs) else None
            if t is not None:
                s = t.untyped_storage()
                out.setdefault(consumer, {})[s.data_ptr()] = (s.nbytes(), param)
        operands = sum(t.numel() * t.element_size() for t in incoming if t is not None)
        operands += sum(grad_inputs[k].numel() * grad_inputs[k].element_size() for k in batch_outputs
                        if k < len(grad_inputs) and grad_inputs[k] is not None)
        self._readings.append((self._probe.segment(), self._made + self._flying(out), name, operands))
        self._in_flight.pop(fn, None)
        for consumer, d in out.items():
            self._in_flight.setdefault(consumer, {}).update(d)

    def _flying(self, more=None):
        """Bytes in flight to parameters, each storage once (a view passed
        on is the same storage)."""
        seen = {}
        for d in self._in_flight.values():
            seen.update(d)
        for d in (more or {}).values():
            seen.update(d)
        return sum(b for b, _ in seen.values())

    def _accumulated(self, p):
        if self.why_not is not None:
            return
        try:
            self._accumulated_read(p)
        except Exception as e:  # never the loop's failure: the profile is dropped
            self._fail(e)

    def _accumulated_read(self, p):
        g = p.grad
        if g is None:
            return
        # The peak since the last reading held what was on its way to p (it
        # lives until the accumulation is done) and, where p's gradient is
        # made now, that gradient: the same storage where it was taken from
        # the node that made it, a copy otherwise.
        storage = g.untyped_storage()
        flying = self._flying()
        fresh = id(p) in self._unset
        copied = fresh and not any(storage.data_ptr() in d for d in self._in_flight.values())
        self._readings.append((self._probe.segment(),
                               self._made + flying + (storage.nbytes() if copied else 0), "AccumulateGrad", 0))
        # From here it is p's gradient, or added into it: no longer in flight.
        for consumer in list(self._in_flight):
            d = {k: v for k, v in self._in_flight[consumer].items() if v[1] != id(p)}
            if d:
                self._in_flight[consumer] = d
            else:
                del self._in_flight[consumer]
        if fresh:
            self._unset.discard(id(p))
            self._made += storage.nbytes()

    def remove(self):
        """Takes the hooks off; whether any were on."""
        had = bool(self._handles)
        for h in self._handles:
            h.remove()
        self._handles = []
        # Nothing of the graph kept past its backward: the in-flight table
        # is keyed by its nodes.
        self._in_flight = {}
        return had

    def readings(self):
        """{step, samples, tokens, start_mib, names, rise_mib, gradients_mib,
        held_mib, operands_mib},
        or None. CPU readings are marks, resolved by the probe first
        (resolve)."""
        if self.why_not is not None or not self._readings or not self.samples:
            return None
        start = self._probe.resolve_segment(self._start)
        if start is None:
            return None
        names, rise, grads, held, operands = [], [], [], [], []
        for reading, grad_bytes, name, operand_bytes in self._readings:
            r = self._probe.resolve_segment(reading)
            if r is None:
                return None
            names.append(name)
            rise.append(round((r[1] - start[0]) / MIB, 6))
            grads.append(round(grad_bytes / MIB, 6))
            held.append(round((min(r[0], r[1]) - start[0]) / MIB, 6))
            operands.append(round(operand_bytes / MIB, 6))
        out = {"step": self.step, "samples": self.samples, "start_mib": round(start[0] / MIB, 6), "names": names,
               "rise_mib": rise, "gradients_mib": grads, "held_mib": held, "operands_mib": operands}
        if self.tokens:
            out["tokens"] = self.tokens
        return out
