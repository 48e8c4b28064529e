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
        self._kept = []  # per loss added: its value (read on the host), or (chunk, slot) of its copy
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
            chunk, slot = len(self._chunks) - 1, self._used
            self._chunks[chunk][slot:slot + 1].copy_(loss.detach().reshape(1), non_blocking=True)
            self._used += 1
            self._kept.append((chunk, slot))
        else:
            self._kept.append(float(loss.detach().float().item()) if isinstance(loss, torch.Tensor) else float(loss))
        return len(self._kept) - 1

    def values(self):
        """Every loss, in the order added; call after the device has been
        waited for (the copies are done by then)."""
        return [float(self._chunks[k[0]][k[1]].item()) if isinstance(k, tuple) else k for k in self._kept]
