"""The tensor census by role, counted from the tensors themselves as
memory_diagnostics counts them: each storage once, by its bytes."""
import torch

MIB = float(1 << 20)


class _Counter:
    def __init__(self, device_type=None):
        self.device_type = device_type
        self.seen = set()
        self.bytes = 0

    def add(self, t):
        if not isinstance(t, torch.Tensor) or t.is_meta:
            return
        # Only what lives on the recorded device: torch.optim keeps Adam's
        # `step` counters on the CPU when the parameters are on CUDA.
        if self.device_type is not None and t.device.type != self.device_type:
            return
        try:
            storage = t.untyped_storage()
        except (RuntimeError, NotImplementedError):  # a tensor subclass without storage
            return
        key = storage.data_ptr()
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


def take_census(parameters, optimizers, device_type=None):
    """Parameters, their gradients, and the optimizers' per-parameter state
    (torch.optim's `state`: Adam's moments, SGD's momentum; a scalar `step`
    tensor counts too, as it is state the optimizer made)."""
    params, grads, state = _Counter(device_type), _Counter(device_type), _Counter(device_type)
    for p in parameters:
        params.add(p)
        grads.add(p.grad)
    for opt in optimizers:
        for s in opt.state.values():
            for t in _state_tensors(s):
                state.add(t)
    return {
        "parameters_mib": params.bytes / MIB,
        "gradients_mib": grads.bytes / MIB,
        "optimizer_state_mib": state.bytes / MIB,
    }


def storage_bytes(tensors):
    c = _Counter()
    for t in tensors:
        c.add(t)
    return c.bytes
