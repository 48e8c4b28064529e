"""Each backward's loss, kept without waiting for the device.

Reading a CUDA loss with .item() waits for everything queued before it: a
synchronisation per step that the loop without the recorder does not make,
and in a loop bound by the device, the host's work after it (the
optimizer's launches, the next batch) is then the device's idle time. The
recorder instead copies each loss into page-locked host memory on the
loss's stream, without waiting, and reads the copies when recording ends,
after the device has been waited for. Page-locked memory is allocated (a
call that may synchronise) in chunks that double, the first before the
first sample, so a long run pays it a handful of times.

Where the native reading was built (memdiag/_native.py) it copies the
loss's bytes as they are, whatever the floating dtype. Otherwise a loss in
another dtype than float32 is converted on the device on its way (a
512-byte temporary the caching allocator serves from its small pool).
"""
import torch

_FIRST_CHUNK = 1024
_grad_enabled, _set_grad_enabled = torch._C.is_grad_enabled, torch._C._set_grad_enabled
_BLOCK = 1024  # slots made as views at a time: unbind() makes them in one call, a view per slot costs 4x


class LossBuffer:
    def __init__(self, device, native=None):
        """native: the native reading's module (memdiag/_native.py), whose
        Losses makes the same copy without Python's cost (48 us a step on
        the H200, the host allocator's event record at every copy); its
        memory is cudaHostAlloc's, outside the pinned figure the recorder
        reads. A loss it declines (not a float one-element tensor) is kept
        as below."""
        self._cuda = torch.device(device).type == "cuda"
        self._chunks = []
        self._slots = ()  # views of the next free slots of the last chunk, one element each
        self._used = 0  # slots used in the last chunk
        self._next = 0  # of _slots, the next free one
        # per loss added: its value (read on the host), (chunk, slot) of its copy, or the native slot (an int)
        self._kept = []
        self._native = None
        if self._cuda and native is not None and hasattr(native, "Losses"):
            try:
                self._native = native.Losses()
            except Exception:  # no page-locked memory to be had: the copies below
                self._native = None
        if self._cuda and self._native is None:
            self._grow()

    def _grow(self):
        size = _FIRST_CHUNK << len(self._chunks)
        self._chunks.append(torch.empty(size, dtype=torch.float32, pin_memory=True))
        self._used = 0
        self._views()

    def _views(self):
        chunk = self._chunks[-1]
        self._slots = chunk[self._used:min(self._used + _BLOCK, chunk.numel())].unbind(0)
        self._next = 0

    def add(self, loss):
        """Keeps `loss` (a one-element tensor or a number); returns its handle."""
        if self._native is not None:
            slot = self._native.add(loss)
            if slot >= 0:
                self._kept.append(slot)
                return len(self._kept) - 1
        if self._cuda and isinstance(loss, torch.Tensor) and loss.is_cuda:
            if not self._chunks:
                self._grow()
            if self._next == len(self._slots):
                if self._used == self._chunks[-1].numel():
                    self._grow()
                else:
                    self._views()
            # Without autograd (the loss requires grad; its copy must not):
            # cheaper than a detached view a step.
            enabled = _grad_enabled()
            _set_grad_enabled(False)
            try:
                self._slots[self._next].copy_(loss if loss.dim() == 0 else loss.reshape(()), non_blocking=True)
            finally:
                _set_grad_enabled(enabled)
            self._next += 1
            self._kept.append((len(self._chunks) - 1, self._used))
            self._used += 1
        else:
            self._kept.append(float(loss.detach().float().item()) if isinstance(loss, torch.Tensor) else float(loss))
        return len(self._kept) - 1

    def values(self):
        """Every loss, in the order added; call after the device has been
        waited for (the copies are done by then)."""
        chunks = [c.tolist() for c in self._chunks]
        native = self._native.values() if self._native is not None else ()
        return [chunks[k[0]][k[1]] if isinstance(k, tuple) else native[k] if isinstance(k, int) else k
                for k in self._kept]
