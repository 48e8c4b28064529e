"""The warm-up memory_diagnostics does before its first sample, for the Python
cross-checks (scripts/crosscheck-*.py): the cuBLAS and cuBLASLt workspaces of
the main thread and of autograd's backward thread, made by a Linear-shaped
addmm on each, so both sides' figures carry the same workspaces."""
import torch


class AddmmInBackward(torch.autograd.Function):
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
    x = torch.randn(64, 64, device=device, requires_grad=True)
    w = torch.randn(64, 64, device=device, requires_grad=True)
    b = torch.randn(64, device=device, requires_grad=True)
    torch.addmm(b, x, w.t()).sum().backward()
    AddmmInBackward.apply(torch.ones(64, 64, device=device, requires_grad=True)).sum().backward()
