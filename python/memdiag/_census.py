"""The tensor census by role, counted from the tensors themselves as
memory_diagnostics counts them: each storage once, by its bytes.

It runs at every phase boundary, so it is written for speed: a tensor costs
one storage lookup, and the recorder recounts a role only in the phases that
can change it (recorder._take_census)."""
import torch

MIB = float(1 << 20)


class _Counter:
    def __init__(self, cuda=None):
        # Only what lives on the recorded device: torch.optim keeps Adam's
        # `step` counters on the CPU when the parameters are on CUDA.
        self.cuda = cuda
        self.seen = set()
        self.bytes = 0

    def add(self, t):
        if t is None:
            return
        # A DTensor (FSDP2's sharded parameters, their gradients and state)
        # holds this rank's shard in a local tensor: that is its memory here.
        local = getattr(t, "_local_tensor", None)
        if local is not None:
            t = local
        if self.cuda is not None and t.is_cuda is not self.cuda:
            return
        try:
            storage = t.untyped_storage()
            key = storage.data_ptr()
        except (RuntimeError, NotImplementedError, AttributeError):  # no storage (a subclass, meta)
            return
        if key == 0 or key in self.seen:
            return
        self.seen.add(key)
        self.bytes += storage.nbytes()


def _state_tensors(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _state_tensors(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _state_tensors(v)


def _cuda_flag(device_type):
    return None if device_type is None else device_type == "cuda"


def parameters_mib(parameters, device_type=None):
    c = _Counter(_cuda_flag(device_type))
    for p in parameters:
        c.add(p)
    return c.bytes / MIB


_Tensor = torch.Tensor
_Parameter = torch.nn.Parameter


def gradients_mib(parameters, device_type=None, native=None):
    """_Counter's count of the parameters' gradients, written out: it runs
    at two phases of every step, a gradient at a time. native: the native
    reading's gradient_bytes (native/allocator_reading.cpp), the same count
    without a Python object a gradient; where it declines (-1: DTensor's
    shards), the count here."""
    cuda = _cuda_flag(device_type)
    if native is not None:
        try:
            n = native(parameters, -1 if cuda is None else int(cuda))
        except Exception:  # the count here, whatever the native one met
            n = -1
        if n >= 0:
            return n / MIB
    seen = set()
    total = 0
    for p in parameters:
        t = p.grad
        if t is None:
            continue
        if type(t) is not _Tensor and type(t) is not _Parameter:
            local = getattr(t, "_local_tensor", None)  # a DTensor's: this rank's shard
            if local is not None:
                t = local
        if cuda is not None and t.is_cuda is not cuda:
            continue
        try:
            storage = t.untyped_storage()
            key = storage.data_ptr()
        except (RuntimeError, NotImplementedError, AttributeError):  # no storage (a subclass, meta)
            continue
        if key == 0 or key in seen:
            continue
        seen.add(key)
        total += storage.nbytes()
    return total / MIB


def state_holders(optimizers):
    """The objects whose `state` optimizer_states() reads, in its order."""
    out = []
    for opt in optimizers:
        out.append(opt)
        # A wrapped optimizer, whatever the wrapper calls it
        # (ZeroRedundancyOptimizer's .optim, timm's Lookahead's
        # ._base_optimizer, SAM's .base_optimizer): its state is where the
        # wrapper's is.
        for inner in vars(opt).values():
            if isinstance(inner, torch.optim.Optimizer) and inner is not opt and all(inner is not o for o in out):
                out.append(inner)
    return out


def optimizer_states(opt):
    """The `state` dicts an optimizer keeps: its own, and a wrapped
    optimizer's (ZeroRedundancyOptimizer keeps this rank's shard in
    `.optim.state` and leaves its own `state` empty)."""
    return [h.state for h in state_holders([opt])]


def optimizer_state_mib(optimizers, device_type=None, parameters=()):
    """torch.optim's per-parameter `state` (Adam's moments, SGD's momentum;
    a `step` counter tensor on the device counts too), a wrapped
    optimizer's included; each storage once, and none that is a
    parameter's: SAM keeps the weights' pre-perturbation copy as `old_p`
    and hands it back as the weights (`p.data = old_p`), after which that
    state is the weights' own storage (an independent check read 3.00x
    where Adam's moments are 2.00x)."""
    c = _Counter(_cuda_flag(device_type))
    for p in parameters:
        local = getattr(p, "_local_tensor", None)
        try:
            key = (p if local is None else local).untyped_storage().data_ptr()
        except (RuntimeError, NotImplementedError, AttributeError):
            continue
        if key:
            c.seen.add(key)
    for state in (st for opt in optimizers for st in optimizer_states(opt)):
        for s in state.values():
            if isinstance(s, dict):
                for v in s.values():
                    if isinstance(v, torch.Tensor):
                        c.add(v)
                    else:
                        for t in _state_tensors(v):
                            c.add(t)
            else:
                for t in _state_tensors(s):
                    c.add(t)
    return c.bytes / MIB


def take_census(parameters, optimizers, device_type=None):
    return {
        "parameters_mib": parameters_mib(parameters, device_type),
        "gradients_mib": gradients_mib(parameters, device_type),
        "optimizer_state_mib": optimizer_state_mib(optimizers, device_type, parameters),
    }


def storage_bytes(tensors):
    c = _Counter()
    for t in tensors:
        c.add(t)
    return c.bytes
