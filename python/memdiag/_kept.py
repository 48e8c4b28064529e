"""What a loop keeps from one step to the next, named: the tensors alive at
a cleanup that were not at the one before and are not the model's state
(parameters, gradients, buffers, optimizer state), grouped by what they are
(rank and dtype, the autograd node that made them, the model output they
were: not the shape, which varies where the steps do), and graphs that outlive their step (a running loss sum that is never
detached keeps every step's graph through its grad_fn).

The live tensors are found by walking the garbage collector's objects
(after a collection), which costs time in proportion to the process's
Python objects, so only a few cleanups are walked: those of steps 0 to 6.
Step 0's walk is the baseline (what it made, the optimizer's state among
it, is never called kept): a tensor new at step 1's walk and alive at
steps 2 and 3's was kept for good (alive at the next walk only, it may be
a batch a data loader prefetched, used and let go a step later), and the
same kind must be kept so in two of the last four windows (kept every
step, or every other, not once); a run of three steps, walked too few
times for that, is read by what outlived one step. A walk's cost is the collector's objects, most of them a
library's (torch's and transformers' modules, classes and functions): a
full collection and a scan of them cost 0.1 to 0.2 s a walk in a process
that has imported torch alone. So when recording starts the process's
objects are collected once and frozen (gc.freeze: kept out of later
collections and scans), and unfrozen after the last walk: a walk then sees
what the recording made, and what the loop keeps is among that.

On CUDA the line of the user's code that allocated a kept tensor comes from
the caching allocator's own record of each live block's Python stack
(torch.cuda.memory._record_memory_history(enabled="state", stacks="python"):
no history of frees, only the stacks of what is allocated now). It is on
from the start of recording to the last walk, when one snapshot reads the
stacks of the blocks alive, and then off; a process that records its
history already keeps its own settings and lends its snapshot.
MEMDIAG_ALLOCATION_STACKS=0 leaves the allocator alone.
"""
import gc
import os
import sys
import time
import warnings
import weakref

import torch

# Steps 0 to 6: what is kept every other step (an evaluation every second
# step, its outputs kept) is in two windows of the last four.
WALKED_STEPS = (0, 1, 2, 3, 4, 5, 6)
MAX_TENSOR_RECORDS = 5
_GRAPH_NODE_CAP = 20000  # a graph walk stops here: more is "at least"
_HELD_GRAPH_FLOOR = 256 << 10  # bytes: less held by a graph is no signal (the analysis's kMinimumSignalMib)
# Resident tensors: alive at every walk from the first that found them to
# the last, not the model's state; the few largest are named, each of 1 MiB
# at least (another model's Parameters together, whatever their sizes).
RESIDENT_FLOOR = 1 << 20
MAX_RESIDENT_RECORDS = 3
_MIB = float(1 << 20)


class KeptTracker:
    def __init__(self, model=None):
        # The model's buffers by name, at each walk: one grown every step
        # (a history kept with torch.cat onto a registered buffer) is the
        # model's state to the walk, so it is watched by name instead.
        self._model = weakref.ref(model) if model is not None else None
        self._buffers_by_walk = []
        # Per walk: of each kind of tensor made since the walk before (rank,
        # dtype, device and every size but the first), the largest, and the
        # step's samples and tokens. A tensor the loop replaces every step
        # with a larger copy of itself (hist = torch.cat([hist, new])) is
        # never the same tensor at two walks: it is found by its kind
        # growing at every walk while the steps' inputs do not.
        self._grown_by_walk = []
        self._alive_before = None  # the tensors alive at the last walk: id -> weakref
        # Per walk: how many storages of each kind and shape past the first
        # dimension are alive (rank, dtype, device, autograd node, shape[1:]).
        self._kinds_by_walk = []
        # What a walk found alive beside the model's state and every walk
        # since still finds (the same tensor): a buffer the loop fills (a
        # rollout's observations), data or a cache it keeps on the device,
        # another model's weights (an EMA copy made in the loop). storage
        # key -> (weakref, record, the step of the walk that first found
        # it, whether a Parameter): tensors of a megabyte or more, and
        # Parameters of no recorded model or optimizer of any size (one
        # copy of a model is many small ones); pruned at each walk to the
        # ones still alive.
        self._resident = {}
        self._existing = {}  # start()'s: the tensors held before recording that may be resident, until the first walk
        self._born = None  # what was new at the last walk: id -> (weakref, signature, storage, record)
        # What was new at the walk before the last and alive at the last:
        # kept so far, and kept for good if alive at the next walk too.
        self._candidates = None
        # Per walk from the third on: what was new two walks before and is
        # alive still, by kind (see records()); and the last candidates'.
        self._kept_by_window = []
        self._pending = None
        self._alive_at_walk = []
        self._graph_nodes = []  # per walk: the largest graph a live non-state tensor holds
        self._held_by_walk = []  # per walk after the first: bytes of the tensors new since the walk before
        self._outputs = {}  # this step's model outputs: id(tensor) -> (path, model)
        # And by storage: (device, index, address, bytes) -> (path, model,
        # shape), for a view of an output kept in its stead (logits.detach()
        # is another tensor over the same storage).
        self._output_storages = {}
        # This step's submodules' outputs, where the modules' forwards are
        # tracked (steps 0 and 1): id(tensor) -> (weakref, "output of module
        # NAME (TYPE)"); and per kind of kept tensor, the module that made
        # one (a forward hook's list, a module caching what its child made:
        # no line of the loop's made it).
        self._module_outputs = {}
        self._module_order = {}  # module output label -> its first call's place in the forward
        self._module_named = {}
        self._where = None  # the line of the loop that called the model
        self.retain_graph_at = None  # where backward(retain_graph=True) was called, if it was
        # A retaining backward not yet followed by another over the same
        # graph (two losses of one forward: the first keeps the graph for
        # the second, which frees it); one still waiting at the next
        # retaining backward or at the end kept its graph past its step.
        # (Not judged at cleanups: the steady lane's are not this code's.)
        self._retain_pending = False
        self._retain_unfollowed = False
        self.walk_ms = 0.0
        self.walks = 0
        self.walked_steps = []  # the steps whose cleanups were walked
        self._froze = False
        # The allocator's Python stacks of live blocks (CUDA): None where not
        # recorded, "ours" where the recording turned it on, "theirs" where
        # the process had; and (device index, address) -> frames, read once.
        self._stacks = None
        self._alloc_frames = None
        # Forwards of the model with autograd on that no backward followed
        # (an evaluation without torch.no_grad()): (line, model) of the
        # last, and the bytes the graphs of the live tensors still held
        # saved at each walk since one was seen.
        self._no_backward_forward = None
        self._held_graph_by_walk = []  # (walked step, bytes the live graphs held saved)
        self.checkpointed = False  # the model checkpoints: its saved tensors are not read (their hooks recompute)
        self.walking = False
        self.stacks_ms = 0.0

    # ----- what the loop does ------------------------------------------------

    def forward_called(self):
        """Before the model's forward: the first frame outside torch and
        memdiag is the loop's line."""
        self._where = _caller()

    def forward_returned(self, output, model_name):
        for path, t in _named_tensors(output, "output"):
            # With the tensor: an output freed before the walk leaves its id
            # to a tensor made after it (the loop's torch.cat), which was no
            # output.
            # With the line of its call: an evaluation's forward between
            # steps is another call than the training one.
            self._outputs[id(t)] = (path, model_name, weakref.ref(t), self._where)
            key = _storage_key(t)
            if key is not None:
                self._output_storages[key] = (path, model_name, tuple(t.shape), self._where)

    def module_returned(self, name, kind, output):
        if name is None or not name:
            return  # a module outside the model (a loss the loop calls), or the model itself (forward_returned)
        if isinstance(output, torch.Tensor):
            tensors = (output,)
        elif isinstance(output, (tuple, list)):
            tensors = [t for t in output[:4] if isinstance(t, torch.Tensor)]
        else:
            return
        label = f"output of module {name} ({kind})"
        order = self._module_order.setdefault(label, len(self._module_order))  # the forward's order, for naming
        for t in tensors:
            self._module_outputs[id(t)] = (weakref.ref(t), label, order)

    def no_backward_forward(self, model_name):
        """A forward of the model with autograd on outside the training
        step (in eval() mode, after step()): its graph is saved for a
        backward that, unless one follows, never runs."""
        self._no_backward_forward = (_caller(), model_name)

    def backward_called(self, args, kwargs):
        retain = kwargs.get("retain_graph")
        if retain is None and len(args) >= 2:
            retain = args[1]  # after the tensors: grad_tensors, retain_graph, ... (Tensor.backward passes them so)
        if retain:
            if self.retain_graph_at is None:
                self.retain_graph_at = _caller()
            if self._retain_pending:  # the last one's graph was never backwarded again
                self._retain_unfollowed = True
            self._retain_pending = True

    def backward_again(self):
        """Another backward over the graph the last one kept (the recorder
        saw no forward between): what retain_graph was for."""
        self._retain_pending = False

    # ----- at a cleanup --------------------------------------------------------

    def start(self, existing=None):
        """When recording starts: the process's objects until now
        collected and frozen, out of the walks' way. existing: the tensors
        the process held already (where they were listed), of which
        Parameters and those of a megabyte or more are resident candidates:
        frozen, the walks never see them."""
        self._existing = {}
        for t in existing or ():
            if type(t).__name__ in _TRACING_TENSORS:
                continue
            key = _storage_key(t)
            parameter = isinstance(t, torch.nn.Parameter)
            if key is not None and (parameter or key[3] >= RESIDENT_FLOOR) and key not in self._existing:
                self._existing[key] = (weakref.ref(t), _resident_record(t, key), 0, parameter)
        # A process may hold frozen objects already (on the H200 machine,
        # Python 3.12.3 starts with 375). They are unfrozen with
        # ours at the end: left frozen, whatever the recording froze (the
        # model, say) would never be collected if it sat in a cycle, its
        # device memory held after `del model`; unfreezing costs the
        # process's own freeze only the scans it had saved.
        gc.collect()
        gc.freeze()
        self._froze = True
        self._stacks = _start_stacks(self._model() if self._model is not None else None)

    def end(self):
        self._read_stacks()
        if self._froze:
            gc.unfreeze()
            self._froze = False

    def at_cleanup(self, step, state, inputs=(None, None)):
        """Walks the live tensors after step `step`'s cleanup, if it is one
        walked. state: the tensors that are the model's (not kept), or a
        function that lists them (called only where a live tensor made
        since recording began needs telling from them). inputs: the step's
        (samples, tokens), where its forward showed them."""
        if step not in WALKED_STEPS:
            self._outputs = {}
            self._output_storages = {}
            self._module_outputs = {}
            return
        t0 = time.perf_counter()
        # Tensors in reference cycles (a non-leaf and its graph) linger
        # until a collection: they are not kept, only not yet freed.
        gc.collect()
        baseline = self._alive_before is None  # the first walk: nothing is new yet, no window
        owned = None  # the storages of the model's state, once a tensor needs telling from them
        roots = []  # the autograd nodes of the live tensors that are not the model's state
        alive = {}
        born = {}
        largest = {}  # of the tensors made since the last walk, by kind: (bytes, record) of the largest
        resident = {}  # found at this walk: see __init__
        kinds = {}  # see _kinds_by_walk: kind -> the storages alive
        with warnings.catch_warnings():
            # isinstance on some of the process's objects (deprecated
            # modules' proxies) warns: the user's job must not see that.
            warnings.simplefilter("ignore")
            objects = [o for o in gc.get_objects() if isinstance(o, torch.Tensor)]
        for o in objects:
            if type(o).__name__ in _TRACING_TENSORS:
                continue
            parameter = isinstance(o, torch.nn.Parameter)
            key = _storage_key(o)
            if key is None:
                continue
            if owned is None:
                owned = {_storage_key(t) for t in (state() if callable(state) else state)}
            if key in owned:
                continue
            if parameter:
                # Another module's weights, made since recording began (the
                # model's own were made before and are frozen out of the
                # walk): resident where they stay; nothing else of the walk.
                if key not in self._resident:
                    resident[key] = (weakref.ref(o), _resident_record(o, key), step, True)
                continue
            alive[id(o)] = weakref.ref(o)
            kinds.setdefault((o.dim(), str(o.dtype).replace("torch.", ""), key[0],
                              type(o.grad_fn).__name__ if o.grad_fn is not None else None, tuple(o.shape[1:])),
                             set()).add(key)
            if key[3] >= RESIDENT_FLOOR and key not in resident and key not in self._resident:
                # New or not, the first walk that sees it: a step's own
                # tensors are replaced by the next, and fall out below.
                resident[key] = (alive[id(o)], _resident_record(o, key), step, False)
            fn = o.grad_fn
            if fn is not None:
                roots.append(fn)
            # New since the last walk: an id is not enough, a tensor freed
            # since then leaves its id to the next one made.
            before = self._alive_before.get(id(o)) if self._alive_before is not None else None
            if self._alive_before is not None and (before is None or before() is not o):
                made = self._outputs.get(id(o))
                if made is not None and made[2]() is not o:
                    made = None
                if made is None:
                    # A view over an output's storage, of its shape: the
                    # output detached (its storage the same allocation,
                    # alive since, so no other tensor's).
                    view = self._output_storages.get(key)
                    if view is not None and view[2] == tuple(o.shape):
                        made = (view[0], view[1], None, view[3])
                # A kind of tensor, by its rank, not its shape: a loop whose
                # steps vary in size (dynamic batching, buckets) keeps
                # logits of a new shape every step, the same bug.
                sig = (o.dim(), str(o.dtype).replace("torch.", ""), key[0],
                       type(fn).__name__ if fn is not None else None, made[0] if made else None)
                record = {"shape": list(o.shape), "dtype": sig[1], "device": sig[2], "grad_fn": sig[3],
                          "made_by": f"{made[0]} of {made[1]}" if made else None,
                          "where": made[3] if made else None}
                born[id(o)] = (weakref.ref(o), sig, key, record)
                if o.dim() >= 1 and made is None:
                    kind = (sig[1], sig[2], tuple(o.shape[1:]))
                    if key[3] > largest.get(kind, (0,))[0]:
                        largest[kind] = (key[3], record, key)
                if not made and self._module_outputs:
                    by = self._module_outputs.get(id(o))
                    if by is not None and by[0]() is o:
                        # Every module whose outputs are of the kind: a
                        # retained graph saves the outputs of many (a
                        # ResNet's every layer), one kind of tensor.
                        self._module_named.setdefault(sig, {})[by[1]] = by[2]
        self._kinds_by_walk.append({k: len(v) for k, v in kinds.items()})
        if baseline:
            # With what the process held before recording (frozen: no walk
            # sees it), less the model's state among it.
            existing = {k: v for k, v in self._existing.items() if k not in resident}
            if existing:
                if owned is None:
                    owned = {_storage_key(t) for t in (state() if callable(state) else state)}
                resident.update((k, (v[0], v[1], step, v[3])) for k, v in existing.items() if k not in owned)
            self._existing = {}
        # The same tensor over the same storage, still; and what this walk
        # found first.
        self._resident = {k: v for k, v in self._resident.items() if v[0]() is not None and _storage_key(v[0]()) == k}
        self._resident.update(resident)
        if not baseline:
            # What this step's tensors the loop still holds came to: its
            # outputs, loss and batch until the next step replaces them
            # (the analysis tells those from state made once), and
            # whatever it keeps for good.
            storages = {entry[2] for entry in born.values()}
            self._held_by_walk.append(sum(key[3] for key in storages))
        # What two steps before made and neither step since freed: kept
        # for good. One step is not enough: a loop may hold a step's
        # tensors one step longer and then let them go (a data loader
        # that prefetches the next batch, which the step after uses:
        # Hugging Face's Trainer), which is no habit of keeping.
        if self._candidates is not None:
            self._kept_by_window.append(_by_kind(e for e in self._candidates if e[0]() is not None))
        if self._born is not None:
            self._candidates = [e for e in self._born.values() if e[0]() is not None]
            self._pending = _by_kind(self._candidates)
        # Which windows' tensors of each kind are alive at this walk: at
        # the last, how long the loop holds them (a cache of the last few
        # steps lets the oldest go), read before the steps after it.
        self._alive_at_walk = [{sig: _alive_bytes(v[3]) for sig, v in w.items()}
                               for w in self._kept_by_window + ([self._pending] if self._pending else [])]
        self._born = None if baseline else born
        if not baseline:
            self._grown_by_walk.append((largest, tuple(inputs)))
        self._alive_before = alive
        self._graph_nodes.append(_largest_graph(roots))
        if self._no_backward_forward is not None and self.retain_graph_at is None and not self.checkpointed:
            # What the graphs still held at the cleanup save: a graph
            # backward ran through has freed its saved tensors, one no
            # backward ran through (an evaluation's) holds them. Not in a
            # model that checkpoints: reading a saved tensor there runs
            # its unpack hook, which recomputes the checkpointed forward.
            if owned is None:
                owned = {_storage_key(t) for t in (state() if callable(state) else state)}
            self.walking = True  # forwards a saved tensor's hook runs are none of the loop's
            try:
                self._held_graph_by_walk.append((step, _saved_bytes(roots, owned)))
            finally:
                self.walking = False
        model = self._model() if self._model is not None else None
        if model is not None:
            buffers = {}
            for name, b in model.named_buffers():
                if isinstance(b, torch.Tensor):
                    buffers[name] = (_storage_bytes(b), list(b.shape), str(b.dtype).replace("torch.", ""), b.device.type)
            self._buffers_by_walk.append(buffers)
        self._outputs = {}
        self._output_storages = {}
        self._module_outputs = {}
        self.walk_ms += (time.perf_counter() - t0) * 1e3
        self.walks += 1
        self.walked_steps.append(step)
        if step >= WALKED_STEPS[-1]:
            self.end()  # no more walks: the process's collector as it was

    # ----- what the report says --------------------------------------------------

    def records(self):
        """What was kept every step, largest first, as the report's kept
        records; empty where nothing was."""
        out = []
        # The last walk's candidates close the windows: unconfirmed, they
        # count as the newest window (a kind found there alone is in one
        # window, no habit), and a run walked too few times to confirm any
        # (three steps: walks 0 to 2) is read by what outlived one step.
        windows = self._kept_by_window + ([self._pending] if self._pending is not None else [])
        if windows:
            # Kept as a habit: in two of the last four windows walked, one
            # of them among the last two (what is kept every other step, an
            # evaluation's outputs every second step, is in every second
            # window); a tensor kept once is not called a habit. Its MiB a step is the average over the
            # windows walked since it was first kept.
            recent = windows[-4:]
            # A run walked three times has one window: what step 1 made and
            # step 2's cleanup still found. The last cleanup is often read
            # as recording ends, with the loop's variables still holding
            # their last values, which may have been made before the step
            # before it closed (a GAN's next real batch, made before its
            # zero_grad, and its last losses: "kept" at 3 steps and at no
            # other count). So a kind counts there only where the last walk
            # found more tensors of it alive (of its shape past the first
            # dimension: the kind is by rank, and a GAN's noise is another
            # 4-d tensor) than the walk before: kept, not just not yet
            # replaced.
            last_counts = (self._kinds_by_walk[-2:] if len(windows) == 1 and len(self._kinds_by_walk) >= 2
                           else None)
            for sig in {s for w in recent[-2:] for s in w}:
                seen = [w for w in recent if sig in w]
                if len(windows) >= 2 and len(seen) < 2:
                    continue
                if last_counts is not None:
                    shape = tuple(seen[-1][sig][2]["shape"][1:])
                    kind = (sig[0], sig[1], sig[2], sig[3], shape)
                    if last_counts[1].get(kind, 0) <= last_counts[0].get(kind, 0):
                        continue
                first = next(i for i, w in enumerate(windows) if sig in w)
                record = seen[-1][sig][2]
                # Measured on the windows confirmed (what outlived a second
                # walk) where the last walk's own window holds the kind
                # too: it also holds what the next step lets go (a cache of
                # the last two steps beside a leak read 2.4 MiB a step for
                # 2). A last window without the kind stays in, a step that
                # kept none (a staircase's).
                confirmed = len(self._kept_by_window)
                pending_holds = self._pending is not None and sig in self._pending
                span = windows[first:confirmed] if pending_holds and first < confirmed else windows[first:]
                # How many a step, over the windows it was kept in, as its
                # MiB a step is: the last window's count beside the mean's
                # bytes read "4 tensors ..., 3.00 MiB" of 1 MiB tensors where
                # what was kept grew every step (hooks registered each step).
                present_counts = [w[sig][0] for w in span if sig in w]
                count = max(1, round(sum(present_counts) / len(present_counts)))
                nbytes = sum(w[sig][1] for w in span if sig in w) / len(span)
                r = dict(record)
                # Let go since: the oldest windows' tensors of the kind are
                # freed while the newest live (a cache of the last few
                # steps); how many windows' are alive is how many steps.
                alive = [a[sig] for a in self._alive_at_walk[first:] if sig in a]
                bounded = None  # (held steps, bytes a step) of a cache of the kind let go
                if len(alive) >= 2 and not alive[0] and alive[-1]:
                    r["held_steps"] = sum(1 for a in alive if a) + 1  # and the last walk's own, in no window yet
                elif len(alive) >= 2 and 0 < alive[0] < windows[first][sig][1]:
                    # Part of the oldest window's tensors let go, part kept
                    # (a cache of the last steps beside a list kept for
                    # good, of one kind): the part still alive is the leak,
                    # the rest a cache, each said apart.
                    freed = windows[first][sig][1] - alive[0]
                    steps = sum(1 for a in alive if a > alive[0]) + 1
                    nbytes = alive[0]
                    bounded = (steps, freed)
                if r.get("made_by") is None and sig in self._module_named:
                    named = self._module_named[sig]
                    r["made_by"] = _modules_named(sorted(named, key=named.get))
                # Of several shapes in a step (a copy of every gradient:
                # the parameters' own shapes, the same every step), how
                # many: the record's shape is the largest. Varying is from
                # step to step (a mask per sequence length), not within one.
                shapes = seen[-1][sig][4]
                if len(shapes) > 1:
                    r["shapes"] = len(shapes)
                if any(w[sig][4] != shapes for w in seen):
                    r["shape_varies"] = True
                at = self._allocated_at(ref for w in reversed(span) if sig in w
                                        for _, views in reversed(w[sig][3]) for ref in views)
                if at is not None:
                    r["allocated_at"] = at
                r.update({"what": "tensor", "per_step": count, "mib_per_step": nbytes / _MIB})
                # Kept in some windows only (an evaluation every second
                # step): how many steps apart, the MiB a step being the
                # average over them.
                present = sum(1 for w in span if sig in w)
                if present and len(span) >= 2 * present:
                    r["every_steps"] = round(len(span) / present)
                if bounded is not None:
                    count_kept = max(1, round(count * nbytes / (nbytes + bounded[1])))
                    # A cache said apart only where it holds tensors of its
                    # own for more than one step (a one-off tensor let go
                    # later is no cache: the leak's figure is right alone).
                    if count - count_kept >= 1 and bounded[0] >= 2:
                        out.append(dict(r, per_step=count - count_kept, mib_per_step=bounded[1] / _MIB,
                                        held_steps=bounded[0]))
                        r["per_step"] = count_kept
                out.append(r)
        # A buffer of the model's grown at each of the last walks (two
        # growths at least): kept by the model's own code, every step.
        walks = self._buffers_by_walk
        if len(walks) >= 3:
            model = self._model() if self._model is not None else None
            for name, (nbytes, shape, dtype, device) in walks[-1].items():
                sizes = [w.get(name, (None,))[0] for w in walks[-3:]]
                if None in sizes or not sizes[0] < sizes[1] < sizes[2]:
                    continue
                first = next(i for i, w in enumerate(walks) if name in w)
                per_step = (nbytes - walks[first][name][0]) / max(1, len(walks) - 1 - first)
                out.append({"what": "tensor", "shape": shape, "dtype": dtype, "device": device, "grad_fn": None,
                            "made_by": f"buffer {name} of {type(model).__name__ if model is not None else 'the model'}",
                            "grows": True, "where": None, "per_step": 1,
                            "mib_per_step": per_step / _MIB})
        out.extend(self._grown_records())
        out.extend(self._resident_records(out))
        g = self._graph_nodes
        if len(g) >= 3 and g[-1] > g[-2] > g[-3]:
            out.append({"what": "graph", "graph_nodes": g[-1], "graph_nodes_before": g[-2]})
        if self.retain_graph_at is not None and (self._retain_unfollowed or self._retain_pending):
            out.append({"what": "retain_graph", "where": self.retain_graph_at})
        held = [b for _, b in self._held_graph_by_walk[-3:]]
        if len(held) >= 2 and all(b >= _HELD_GRAPH_FLOOR for b in held[-2:]):
            # Held at the last two walks at least: from one step into the
            # next, through its training forward and backward.
            where, model_name = self._no_backward_forward
            first = next(s for s, b in self._held_graph_by_walk if b >= _HELD_GRAPH_FLOOR)
            record = {"what": "held_graph", "where": where, "made_by": model_name, "from_step": first,
                      "mib_per_step": sorted(held)[len(held) // 2] / _MIB}
            if len(held) >= 3 and all(b - a >= _HELD_GRAPH_FLOOR for a, b in zip(held, held[1:])):
                # More at each walk: the loop keeps every evaluation's graph
                # (its losses in a list), not the last one: a leak.
                record["grows"] = True
            out.append(record)
        out.sort(key=lambda r: (r.get("held_steps") is not None, -r.get("mib_per_step", 0.0)))  # leaks first
        # The largest few kinds of tensor name the bug; a retained graph's
        # saved tensors are dozens of kinds, their total said in the rest.
        tensors = [r for r in out if r["what"] == "tensor"]
        out = tensors[:MAX_TENSOR_RECORDS] + [r for r in out if r["what"] != "tensor"]
        held = sorted(self._held_by_walk)
        if held and held[len(held) // 2] > 0:
            out.append({"what": "held", "mib_per_step": held[len(held) // 2] / _MIB})
        return out


    def _resident_records(self, kept):
        """The largest tensors alive at every walk from the first that found
        them (step 0's, for what the loop made before training) to the last,
        not the model's state, and another model's Parameters as one record:
        what every step's peak stands on
        beside the weights, gradients and optimizer state (a rollout buffer
        of 110 MiB, 45% of a PPO loop's peak, was named nowhere). Three
        walks at least, so that a step's own tensors (its batch, its
        outputs) have been replaced; not those of a kind kept every step
        (the first of a list kept for good is the leak's)."""
        if not self._resident or self.walks < 3:
            return []
        # Found by the third walk from the end at the latest: alive at three
        # walks, so that a step's own tensors (its batch, its outputs, kept
        # one step longer by a prefetching loader) have been replaced.
        latest = self.walked_steps[-3]
        kept_kinds = {(len(r["shape"]), r["dtype"], r["device"]) for r in kept if r["what"] == "tensor"}
        out = []
        weights = {}  # device -> [bytes, count, largest (bytes, record), first step]
        for key, (ref, record, first, parameter) in sorted(self._resident.items(), key=lambda kv: -kv[0][3]):
            if ref() is None or first > latest:
                continue
            if parameter:
                w = weights.setdefault(key[0], [0, 0, (0, record), first])
                w[0] += key[3]
                w[1] += 1
                w[3] = min(w[3], first)
                if key[3] > w[2][0]:
                    w[2] = (key[3], record)
                continue
            if (len(record["shape"]), record["dtype"], record["device"]) in kept_kinds:
                continue  # the oldest of what the loop keeps (or caches) every step: the leak's own record
            if len(out) == MAX_RESIDENT_RECORDS:
                continue
            r = dict(record, what="resident", per_step=1, mib_per_step=key[3] / _MIB, from_step=first)
            at = self._allocated_at([ref])
            if at is not None:
                r["allocated_at"] = at
            out.append(r)
        for device, (nbytes, count, (_, record), first) in weights.items():
            if nbytes >= RESIDENT_FLOOR:
                # One record for all of them: the largest one's shape, their
                # count and bytes.
                out.append(dict(record, what="resident", per_step=count, mib_per_step=nbytes / _MIB, from_step=first,
                                made_by="parameters of no recorded model or optimizer"))
        out.sort(key=lambda r: -r["mib_per_step"])
        return out[:MAX_RESIDENT_RECORDS]

    def _grown_records(self):
        """Kinds of tensor made anew at each of the last three walks, each
        time larger, whose first size is not the step's samples or tokens (a
        step's batch or outputs grow so where the steps do, and are let go):
        a tensor the loop replaces every step with a larger copy."""
        walks = self._grown_by_walk
        if len(walks) < 3:
            return []
        out = []
        last = walks[-3:]
        for kind, (nbytes, record, key) in last[-1][0].items():
            sizes = [w[0].get(kind, (None,))[0] for w in last]
            if None in sizes or not sizes[0] < sizes[1] < sizes[2]:
                continue
            firsts = [w[0][kind][1]["shape"][0] for w in last]
            # As large as its step's batch (or tokens), or beside steps
            # whose size the recorder did not see: the step's own, maybe.
            if any(w[1][0] is None or firsts[i] in w[1] for i, w in enumerate(last)):
                continue
            r = dict(record)
            r.update({"what": "tensor", "made_by": None, "grows": True, "where": None, "per_step": 1,
                      "mib_per_step": (sizes[2] - sizes[0]) / 2 / _MIB})
            # By its block's address at the last walk: the tensor itself is
            # gone by now (the loop replaced it with a larger copy).
            at = self._line_at(key)
            if at is not None:
                r["allocated_at"] = at
            out.append(r)
        return out

    # ----- the allocator's stacks (CUDA) -------------------------------------

    def _read_stacks(self):
        """At the last walk (or where recording ends before it): the stacks
        of the blocks alive now, read once; the allocator's recording then
        off again where it was ours."""
        if self._stacks is None or self._alloc_frames is not None:
            return
        t0 = time.perf_counter()
        self._alloc_frames = {}
        try:
            snapshot = torch.cuda.memory._snapshot()
            for segment in snapshot.get("segments", ()):
                device = segment.get("device")
                for block in segment.get("blocks", ()):
                    frames = block.get("frames")
                    if frames and block.get("state") == "active_allocated":
                        self._alloc_frames[(device, block["address"])] = frames
        except (RuntimeError, KeyError, TypeError):
            pass  # no stacks: the records keep the lines the hooks saw
        finally:
            if self._stacks == "ours":
                _stop_stacks()
            self.stacks_ms += (time.perf_counter() - t0) * 1e3

    def stacks_read(self):
        """Whether the allocator's stacks were read (CUDA)."""
        return self._stacks is not None and self._alloc_frames is not None

    def _line_at(self, key):
        """The user's line on the allocation stack of the block at a
        storage key, where the allocator recorded it."""
        if not self._alloc_frames or key is None or key[0] != "cuda":
            return None
        frames = self._alloc_frames.get((key[1], key[2]))
        return user_line(frames) if frames else None

    def _allocated_at(self, refs):
        """_line_at of the first of the tensors (weakrefs) still alive whose
        block the allocator recorded."""
        if not self._alloc_frames:
            return None
        for ref in refs:
            t = ref()
            line = self._line_at(_storage_key(t)) if t is not None else None
            if line is not None:
                return line
        return None


def _modules_named(names):
    """What made a kind of kept tensor, of the modules' outputs seen among
    it: "output of module 1 (ReLU)" where one module's, "outputs of 3
    modules (conv1 (Conv2d), layer1.0 (Bottleneck), ...)" where several."""
    if len(names) == 1:
        return names[0]
    prefix = "output of module "
    shown = [n[len(prefix):] if n.startswith(prefix) else n for n in names]
    return (f"outputs of {len(names)} modules (" + ", ".join(shown[:3]) + (", ..." if len(names) > 3 else "") + ")")


def _by_kind(entries):
    """sig -> (count, bytes, the largest one's record, [(bytes, views'
    weakrefs)] a storage, frozenset of their shapes, the largest one's
    bytes) of (weakref, sig, storage, record) entries, each storage once."""
    kept = {}
    storages = {}  # storage -> its views' weakrefs, in the kind it was counted under
    for ref, sig, key, record in entries:
        views = storages.get(key)
        if views is not None:
            # Another view of a storage counted already (out.detach() put
            # in a bounded cache and in a list kept for good): the storage
            # lives while any of its views does.
            views.append(ref)
            continue
        storages[key] = views = [ref]
        count, nbytes, first, held, shapes, most = kept.get(sig, (0, 0, record, [], frozenset(), 0))
        if key[3] > most:
            first, most = record, key[3]
        kept[sig] = (count + 1, nbytes + key[3], first, held + [(key[3], views)],
                     shapes | {tuple(record["shape"])}, most)
    return kept


def _alive_bytes(held):
    """Bytes of the storages (bytes, views) of which a view is alive."""
    return sum(n for n, views in held if any(ref() is not None for ref in views))


# Tensors torch.compile's tracing keeps (in its caches) that stand for no
# memory: reading their storage's address warns "Accessing the data pointer
# of FakeTensor is deprecated" at the user's job (an independent check's
# compiled model).
_TRACING_TENSORS = frozenset({"FakeTensor", "FunctionalTensor"})


def _resident_record(t, key):
    return {"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", ""), "device": key[0],
            "grad_fn": type(t.grad_fn).__name__ if t.grad_fn is not None else None}


def live_tensors(device_type):
    """Every tensor on devices of the type the process's Python objects
    hold (after a collection)."""
    gc.collect()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # see at_cleanup
        return [o for o in gc.get_objects() if isinstance(o, torch.Tensor) and type(o).__name__ not in _TRACING_TENSORS
                and o.device.type == device_type]


def live_cpu_tensors():
    """Every CPU tensor the process's Python objects hold (after a collection)."""
    return live_tensors("cpu")


def _storage_key(t):
    try:
        s = t.untyped_storage()
        n = s.nbytes()
        if not n:
            return None
        d = t.device
        return (d.type, d.index, s.data_ptr(), n)
    except (RuntimeError, NotImplementedError):  # a meta or sparse tensor: nothing to count
        return None


def _storage_bytes(t):
    try:
        return t.untyped_storage().nbytes()
    except (RuntimeError, NotImplementedError):
        return 0


def _saved_bytes(roots, owned):
    """Bytes of the distinct storages the roots' graphs keep saved for
    backward, the model's state (owned) aside. A graph whose saved tensors
    backward freed raises on reading them: it holds none, and is not
    walked further (backward frees a whole graph's at once)."""
    # The nodes are kept while walking (as _graph_size's): next_functions
    # makes a new Python object per call, and a freed one's id would be
    # taken for a seen node, its graph skipped.
    seen, storages, todo = {}, {}, list(roots)
    while todo and len(seen) < _GRAPH_NODE_CAP:
        fn = todo.pop()
        if fn is None or id(fn) in seen:
            continue
        seen[id(fn)] = fn
        freed = False
        for name in dir(fn):
            if not name.startswith("_saved_"):
                continue
            try:
                value = getattr(fn, name)
            except RuntimeError:  # freed by a backward: the graph holds nothing
                freed = True
                break
            except Exception:  # an attribute a custom node cannot give: nothing to count of it
                continue
            for t in (value if isinstance(value, (tuple, list)) else (value,)):
                if isinstance(t, torch.Tensor):
                    key = _storage_key(t)
                    if key is not None and key not in owned:
                        storages[key] = key[3]
        if not freed:
            todo.extend(n for n, _ in getattr(fn, "next_functions", ()))
    return sum(storages.values())


def checkpointed_graph(root, owned=frozenset(), cap=_GRAPH_NODE_CAP):
    """Whether a loss's graph recomputes in backward what its forward did
    not save, what it saves before its checkpointed regions, and the
    parameters outside the model it makes gradients for: (checkpointed,
    outside bytes or None, outside parameters' bytes).

    Outside parameters: the distinct nn.Parameter leaves the graph
    accumulates gradients into (AccumulateGrad nodes) that are not owned
    (the recorded model's and optimizers'): a teacher or reference model run
    with gradients on, whose activations the graph saves and whose gradients
    backward makes.

    Checkpointed: a node of torch.utils.checkpoint's reentrant form
    (CheckpointFunctionBackward), or a saved tensor whose unpack hook is its
    non-reentrant form's (_checkpoint_hook's, which recomputes on reading).
    The hooks are looked at, not called (SavedTensor.unpack_hook): reading
    the tensor would run the recomputation. A saved tensor with any other
    unpack hook (save_on_cpu's) is not read either, nor counted.

    Outside, where checkpointing was found: the bytes of the distinct
    storages saved (the model's state, owned, aside) by the nodes that a
    checkpointed node leads to, the forward's earlier layers and those
    between its regions, which checkpointing as applied leaves saved (a
    classifier head checkpointed alone leaves every convolution's input).
    What follows the last region (a language model's head and loss) is not
    counted: its largest saved tensors are the logits, which the model
    returns and the loop holds anyway, and checkpointing it recomputes what
    backward needs at once. Walked once a job (the first backward); a node
    type's saved names are listed once."""
    names_of = {}

    def raws(fn):
        """(name, its raw saved values, hooked), a node's saved tensors unread."""
        kind = type(fn)
        names = names_of.get(kind)
        if names is None:
            names = names_of[kind] = [n[len("_raw_saved_"):] for n in dir(fn) if n.startswith("_raw_saved_")]
        for name in names:
            try:
                raw = getattr(fn, "_raw_saved_" + name)
            except Exception:  # freed, or a custom node's: nothing to look at
                continue
            raw = raw if isinstance(raw, (tuple, list)) else (raw,)
            yield name, [getattr(r, "unpack_hook", None) for r in raw]

    # First the checkpointed nodes and the parameters, no saved tensor
    # read: a job without checkpointing pays only this walk.
    seen, todo, marks, params = {}, [root], [], {}
    while todo and len(seen) < cap:
        fn = todo.pop()
        if fn is None or id(fn) in seen:
            continue
        seen[id(fn)] = fn  # kept: see _saved_bytes
        name = type(fn).__name__
        if name == "AccumulateGrad":
            var = getattr(fn, "variable", None)
            if isinstance(var, torch.nn.Parameter):
                key = _storage_key(var)
                if key is not None and key not in owned:
                    params[key] = key[3]
            continue
        if name == "CheckpointFunctionBackward":
            marks.append(fn)  # its saved inputs are the region's: not outside it
        elif any(h is not None and "_checkpoint_hook" in getattr(h, "__qualname__", "")
                 for _, hooks in raws(fn) for h in hooks):
            marks.append(fn)
        todo.extend(n for n, _ in getattr(fn, "next_functions", ()))
    outside_params = sum(params.values())
    if not marks:
        return False, None, outside_params
    # Then what the nodes they lead to (the forward before them) saved.
    before, storages = set(), {}
    todo = [n for m in marks for n, _ in getattr(m, "next_functions", ())]
    while todo:
        fn = todo.pop()
        if fn is None or id(fn) in before or id(fn) not in seen:
            continue
        before.add(id(fn))
        todo.extend(n for n, _ in getattr(fn, "next_functions", ()))
        if type(fn).__name__ == "CheckpointFunctionBackward":
            continue
        for name, hooks in raws(fn):
            if any(h is not None for h in hooks):
                continue  # a region's, or save_on_cpu's: reading runs the hook
            try:
                value = getattr(fn, "_saved_" + name)
            except Exception:  # freed, or not readable: nothing to count
                continue
            for t in (value if isinstance(value, (tuple, list)) else (value,)):
                if isinstance(t, torch.Tensor):
                    key = _storage_key(t)
                    if key is not None and key not in owned:
                        storages[key] = key[3]
    return True, sum(storages.values()), outside_params


def _largest_graph(roots):
    """The largest of the roots' graphs (_graph_size). A root met in a graph
    walked already is not walked again: its graph is part of that one, no
    larger (the last made first: a step's loss before the activations inside
    its graph)."""
    largest = 0
    covered = {}  # every node walked, kept alive (see _graph_size)
    for fn in reversed(roots):
        if id(fn) in covered:
            continue
        seen = {}
        largest = max(largest, _graph_size(fn, seen))
        covered.update(seen)
    return largest


def _graph_size(fn, seen=None):
    # The nodes are kept while walking: next_functions makes a new Python
    # object per call, and a freed one's id would be taken for a seen node.
    seen = {} if seen is None else seen
    todo = [fn]
    while todo and len(seen) < _GRAPH_NODE_CAP:
        f = todo.pop()
        if f is None or id(f) in seen:
            continue
        seen[id(f)] = f
        todo.extend(n for n, _ in getattr(f, "next_functions", ()))
    return len(seen)


def _named_tensors(x, path, depth=0):
    """(path, tensor) of a model's output: a tensor, a mapping or a
    ModelOutput (logits, loss, ...), a tuple or list."""
    if depth > 4:
        return
    if isinstance(x, torch.Tensor):
        yield path, x
    elif isinstance(x, dict) or hasattr(x, "items") and callable(x.items):
        for k, v in list(x.items()):
            yield from _named_tensors(v, f"{path}.{k}" if path != "output" else str(k), depth + 1)
    elif isinstance(x, (tuple, list)):
        for k, v in enumerate(x):
            yield from _named_tensors(v, f"{path}[{k}]", depth + 1)


def _start_stacks(model):
    """Has the CUDA allocator record the Python stack of each live block,
    where the model is on CUDA: "ours"; "theirs" where the process records
    already; None where there is nothing to record (or it is not wanted)."""
    if os.environ.get("MEMDIAG_ALLOCATION_STACKS", "1") == "0" or model is None:
        return None
    try:
        on_cuda = any(p.is_cuda for p in model.parameters())
    except (AttributeError, RuntimeError):
        return None
    if not on_cuda:
        return None
    try:
        if torch._C._cuda_isHistoryEnabled():
            return "theirs"
        torch.cuda.memory._record_memory_history(enabled="state", context="state", stacks="python")
        return "ours"
    except (RuntimeError, AttributeError, TypeError):
        return None


def _stop_stacks():
    try:
        torch.cuda.memory._record_memory_history(enabled=None)
    except (RuntimeError, AttributeError, TypeError):
        pass


def user_line(frames):
    """file:line of the innermost frame of an allocation's stack (innermost
    first, as the allocator's snapshot lists them) outside torch, memdiag
    and installed libraries: the user's line that made the tensor."""
    for f in frames:
        filename = f.get("filename") or ""
        if not filename or filename.startswith("<") or _is_native(filename, f.get("line")) or _is_library(filename):
            continue
        return f"{_shown(filename)}:{f.get('line')}"
    return None


# C and C++ sources: the frames a history recorded with stacks="all" (what
# _record_memory_history() records by default, as a user's own recording
# does) puts between the Python ones.
_NATIVE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hh", ".hpp", ".hxx", ".inl")


def _is_native(filename, line):
    """Whether an allocation stack's frame is a native one: one the
    symbolizer could not resolve ("??", line 0), or in a C or C++ source."""
    return filename == "??" or not line or filename.endswith(_NATIVE_SUFFIXES)


_HERE = os.path.dirname(os.path.abspath(__file__))
_TORCH = os.path.dirname(os.path.abspath(torch.__file__))


_LIBRARY = {}  # an absolute file name -> whether it is torch's, memdiag's or an installed library's


def _is_library(filename):
    library = _LIBRARY.get(filename)
    if library is None:
        name = os.path.abspath(filename)  # a relative name: from the working directory of now
        # site-packages: pip's; dist-packages: Debian's and Ubuntu's Python.
        library = (name.startswith(_HERE) or name.startswith(_TORCH) or f"{os.sep}site-packages{os.sep}" in name
                   or f"{os.sep}dist-packages{os.sep}" in name)
        if os.path.isabs(filename):
            _LIBRARY[filename] = library
    return library


def _shown(filename):
    name = os.path.abspath(filename)
    rel = os.path.relpath(name)
    return rel if not rel.startswith("..") else name


def _caller():
    """file:line of the first frame outside torch, memdiag and the
    libraries a model comes from."""
    f = sys._getframe(2)
    while f is not None:
        filename = f.f_code.co_filename
        if not _is_library(filename):
            return f"{_shown(filename)}:{f.f_lineno}"
        f = f.f_back
    return None
