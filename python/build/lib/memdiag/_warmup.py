"""The warm-up memory_diagnostics does before its first sample: the cuBLAS
and cuBLASLt workspaces of the main thread and of autograd's backward thread
(32 MiB each on an H200, made by the first matmul on each thread), made here
by a Linear-shaped addmm on each so that they land before model_ready and not
in step 0's forward and backward. Its figures are comparable with
memory_diagnostics' only when both carry the same workspaces."""
import torch


class _AddmmInBackward(torch.autograd.Function):
    """A Linear-shaped addmm on autograd's thread."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        torch.addmm(torch.zeros(x.size(0), device=x.device), x, torch.ones_like(x).t())
        return grad


def warm_up(device):
    """memory_diagnostics' warm-up, drawing its random numbers from the same
    generator: a job that seeds, calls this, then builds its model draws
    the same weights and data as memory_diagnostics' run of the same case."""
    x = torch.randn(64, 64, device=device, requires_grad=True)
    w = torch.randn(64, 64, device=device, requires_grad=True)
    b = torch.randn(64, device=device, requires_grad=True)
    torch.addmm(b, x, w.t()).sum().backward()
    _AddmmInBackward.apply(torch.ones(64, 64, device=device, requires_grad=True)).sum().backward()
