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

A loss in another dtype than float32 is converted on the device on its way
(a 512-byte temporary the caching allocator serves from its small pool).
"""
import torch

_FIRST_CHUNK = 1024


class LossBuffer:
    def __init__(self, device):
        self._cuda = torch.device(device).type == "cuda"
        self._chunks = []
        self._used = 0  # slots used in the last chunk
        self._values = []  # the losses read on the host (CPU losses, and resolved ones)
        self._slots = []  # per added loss: ("host", index into _values) or ("pinned", chunk, slot)
        if self._cuda:
            self._grow()

    def _grow(self):
        size = _FIRST_CHUNK << len(self._chunks)
        self._chunks.append(torch.empty(size, dtype=torch.float32, pin_memory=True))
        self._used = 0

    def add(self, loss):
        """Keeps `loss` (a one-element tensor or a number); returns its handle."""
        if isinstance(loss, torch.Tensor) and loss.is_cuda and self._cuda:
            if self._used == self._chunks[-1].numel():
                self._grow()
            chunk = len(self._chunks) - 1
            slot = self._used
            self._chunks[chunk][slot:slot + 1].copy_(loss.detach().reshape(1), non_blocking=True)
            self._used += 1
            self._slots.append(("pinned", chunk, slot))
        else:
            value = float(loss.detach().float().item()) if isinstance(loss, torch.Tensor) else float(loss)
            self._values.append(value)
            self._slots.append(("host", len(self._values) - 1))
        return len(self._slots) - 1

    def values(self):
        """Every loss, in the order added; call after the device has been
        waited for (the copies are done by then)."""
        out = []
        for s in self._slots:
            if s[0] == "host":
                out.append(self._values[s[1]])
            else:
                out.append(float(self._chunks[s[1]][s[2]].item()))
        return out
