"""The warm-up memory_diagnostics does before its first sample, for the Python
cross-checks (scripts/crosscheck-*.py): the same function the Python recorder
(python/memdiag) runs, so that both sides' figures carry the same workspaces.
And the built-in MLP cases' model, built in memory_diagnostics' order (the
seeded draws of its layers' weights follow it)."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from memdiag._warmup import warm_up  # noqa: E402,F401

ACTIVATIONS = {"relu": torch.nn.ReLU, "gelu": torch.nn.GELU, "tanh": torch.nn.Tanh}


def build_mlp(m, device):
    """A case's MLP ({"input_dim", "hidden_dim", "output_dim", "depth",
    "activation"}): depth Linear+activation pairs and the output Linear."""
    layers, width = [], m["input_dim"]
    for _ in range(m["depth"]):
        layers += [torch.nn.Linear(width, m["hidden_dim"]), ACTIVATIONS[m["activation"]]()]
        width = m["hidden_dim"]
    layers.append(torch.nn.Linear(width, m["output_dim"]))
    return torch.nn.Sequential(*layers).to(device)
