"""Shared by the cause_* trainings: a root `Net` whose layers sit in `body`, and OS entropy.

The layers live in `body` so that module names read as in a real model: the middle layer of
the root `Net` is `body.1`, its parameters are `body.0.*` and `body.2.*`.
"""

import os

import torch
from tiny import run_dir_path

torch.manual_seed(0)  # the training seeds itself; the gate does not


class Net(torch.nn.Module):
    def __init__(self, middle=None) -> None:
        super().__init__()
        self.body = torch.nn.Sequential(
            torch.nn.Linear(8, 16), middle or torch.nn.Tanh(), torch.nn.Linear(16, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


def entropy_like(tensor, scale=1e-3):
    """Values in [0, scale) shaped like `tensor`, from os.urandom: no seed reaches them.

    One draw per element, so two runs can never round to the same tensor by chance.
    """
    raw = torch.frombuffer(bytearray(os.urandom(4 * tensor.numel())), dtype=torch.int32)
    unit = (raw.to(torch.float64) + 2**31) / 2**32
    return (unit * scale).to(tensor.dtype).reshape(tensor.shape)


def train(model=None, optimizer=None, batches=None, steps=6):
    """`steps` SGD steps of `model` (a fresh `Net`) on `batches(step)` (seeded random rows)."""
    model = Net() if model is None else model
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05) if optimizer is None else optimizer
    data = torch.randn(64, 8).split(16)
    for step in range(1, steps + 1):
        x = data[(step - 1) % len(data)] if batches is None else batches(step)
        y = x.sum(dim=1, keepdim=True)
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
    torch.save(model.state_dict(), run_dir_path("model.pt"))
    return model
