"""What one forward was given, read off the call's arguments whatever their
shape: positional or keyword (Hugging Face models are called as
model(input_ids=..., labels=...), which a forward pre-hook without
with_kwargs never sees), dicts and mappings (a tokenizer's BatchEncoding is a
UserDict, not a dict), tuples, lists, named tuples and dataclasses of
tensors.

samples: the first tensor's first dimension, in call order (positional
arguments, then keywords as written): the batch. tokens: for sequence
inputs, the integer tensors of two dimensions with that batch (token ids,
batch x length), a batch of each length among them: the ids, their
attention mask and labels of one length are one sequence, and an
encoder-decoder's labels (or decoder ids) of another length are its
second (a T5 job's memory followed its source and target tokens, 3.2 MiB
apart at worst, and its source ids alone 43.8 MiB). Padding included,
since what the model makes scales with the padded shape. Where source and
target lengths are equal in a step they are read as one.

A flat batch with its bags' offsets or lengths (EmbeddingBag's
model(ids, offsets), a recommender's packed ids): where the first tensor is
one-dimensional integers and a later one-dimensional integer tensor is
shorter, that one counts the samples and the first their tokens (read as
the first alone, 256 bags of 20 ids were 5120 samples; read by shape, not
by value, so nothing is copied from the device).

Batches that are not one tensor with a batch dimension: a PackedSequence
(an RNN's variable-length batch: its sequences, and their steps as the
tokens), and a list of samples given one by one (torchvision's detection
models take a list of images and a list of per-image target dicts): a
list of mappings or dataclasses, or of tensors whose shapes differ (no
batch tensor could hold them), is as many samples as it has items.
"""
import dataclasses
from collections.abc import Mapping

import torch
from torch.nn.utils.rnn import PackedSequence

# A forward's arguments are walked this deep and this far at most: a
# pathological structure costs the loop nothing more.
_MAX_DEPTH = 6
_MAX_ITEMS = 256


_Tensor = torch.Tensor
_bool = torch.bool


def sizes(args, kwargs):
    """(samples, tokens) of one forward call; None where it cannot be told."""
    # The forward of every recorded step: tensors given as they are
    # (model(x), model(input_ids=ids, labels=ids)), the common call, are read
    # without the walk, in the walk's order (positional, then keywords).
    if len(args) + (len(kwargs) if kwargs else 0) <= 64:
        first = bags = ids = None
        for t in (args if not kwargs else (*args, *kwargs.values())):
            if not isinstance(t, _Tensor):
                if t is None:
                    continue
                return _walked(args, kwargs)  # anything else: the walk
            if t.dim() == 0:
                continue
            if first is None:
                first = t
            elif bags is None and _bags_of(first, t):
                bags = t
            if t.dim() == 2 and not (t.is_floating_point() or t.is_complex()) and t.dtype != _bool:
                if ids is None:
                    ids = [t]
                else:
                    ids.append(t)
        return _result(first, ids, None if ids else bags)
    return _walked(args, kwargs)


def leading(args, kwargs):
    """The call's first tensor where it is given as it is (model(x),
    model(input_ids=x)), else None: what tells a chunk of a batch."""
    if args:
        t = args[0]
    elif kwargs:
        t = next(iter(kwargs.values()))
    else:
        return None
    return t if isinstance(t, _Tensor) else None


def follows(a, b):
    """Whether b is the chunk of a batch that comes after a: one storage,
    b's first byte right after a's last, the same dtype and shape past the
    first dimension, both contiguous (x.chunk(K), x.split(n), x[i:j] of a
    contiguous batch). Two tensors made apart that the allocator happened
    to place side by side are not: their storages differ."""
    try:
        return (a.dtype == b.dtype and a.dim() == b.dim() and a.dim() > 0 and a.shape[1:] == b.shape[1:] and
                a.is_contiguous() and b.is_contiguous() and
                b.data_ptr() == a.data_ptr() + a.numel() * a.element_size() and
                a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError, AttributeError, TypeError):  # no storage (a subclass, meta)
        return False


def device_bytes(args, kwargs, device):
    """Bytes of the call's tensors on `device` (the walk's tensors, as
    _walked reaches them), each view once: what the step's inputs hold
    there while the forward runs. A view's own bytes, not its storage's: a
    batch sliced from a data set kept on the device is the slice (the data
    set is there whatever the batch)."""
    seen = set()
    total = 0
    for t in _tensors((args, kwargs or {}), 0, [0]):
        d = t.device
        if d.type != device.type or (device.index is not None and d.index != device.index):
            continue
        try:
            s = t.untyped_storage()
            key = (s.data_ptr(), t.storage_offset(), tuple(t.shape), tuple(t.stride()))
            nbytes = min(t.numel() * t.element_size(), s.nbytes())
        except Exception:  # noqa: BLE001 (a nested or subclassed tensor without one storage: not counted, never the job's failure)
            continue
        if key not in seen:
            seen.add(key)
            total += nbytes
    return total


def _bags_of(first, t):
    """t counts the bags of the flat first (offsets or lengths): both
    one-dimensional integers, t the shorter."""
    return (first.dim() == 1 and t.dim() == 1 and _integer(first) and _integer(t)
            and 0 < t.numel() < first.numel())


def _result(first, ids, bags=None):
    """ids: the call's integer tensors of two dimensions, in order."""
    if first is None:
        return None, None
    if bags is not None:
        return int(bags.numel()), int(first.numel())
    samples = int(first.size(0))
    tokens = None
    if ids:
        lengths = set()
        for t in ids:
            if int(t.size(0)) == samples:
                lengths.add(int(t.size(1)))
        total = samples * sum(lengths)
        tokens = total if total > 0 else None
    return (samples if samples > 0 else None), tokens


def _walked(args, kwargs):
    for v in (*args, *(kwargs.values() if kwargs else ())):
        found = _batch_of_items(v)
        if found is not None:
            return found
    first = bags = None
    ids = []
    for t in _tensors((args, kwargs or {}), 0, [0]):
        if t.dim() == 0:
            continue
        if first is None:
            first = t
        elif bags is None and _bags_of(first, t):
            bags = t
        if _token_ids(t):
            ids.append(t)
    return _result(first, ids, None if ids else bags)


def _batch_of_items(v):
    """(samples, tokens) of an argument that is a batch in another form
    than a tensor's first dimension, else None."""
    if isinstance(v, PackedSequence):
        sizes = v.batch_sizes
        if sizes is None or sizes.numel() == 0:
            return None
        return int(sizes[0]), int(v.data.size(0))
    if type(v) is not list or not v or len(v) > _MAX_ITEMS:
        return None
    if all(isinstance(x, Mapping) or (dataclasses.is_dataclass(x) and not isinstance(x, type)) for x in v):
        return len(v), None
    if len(v) >= 2 and all(isinstance(x, _Tensor) for x in v):
        rank = v[0].dim()
        if rank >= 1 and all(x.dim() == rank for x in v) and any(x.shape != v[0].shape for x in v):
            ids = rank == 1 and all(_integer(x) for x in v)
            return len(v), (sum(int(x.numel()) for x in v) if ids else None)
    return None


def _integer(t):
    return not (t.is_floating_point() or t.is_complex()) and t.dtype != torch.bool


def _token_ids(t):
    return t.dim() == 2 and not (t.is_floating_point() or t.is_complex()) and t.dtype != torch.bool


def _tensors(x, depth, seen):
    if seen[0] >= _MAX_ITEMS or depth > _MAX_DEPTH:
        return
    seen[0] += 1
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, Mapping):
        for v in list(x.values()):
            yield from _tensors(v, depth + 1, seen)
    elif isinstance(x, (tuple, list)):
        for v in x:
            yield from _tensors(v, depth + 1, seen)
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        for f in dataclasses.fields(x):
            yield from _tensors(getattr(x, f.name, None), depth + 1, seen)
