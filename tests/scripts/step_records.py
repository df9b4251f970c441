"""Trains 3 SGD steps and writes, with the probe's own digest, what each step's record must hold.

The model is called with a keyword argument, a loss module (no parameters) is called on its
output, and an evaluation call under no_grad sits between steps: none of these is an input
batch except the model's `x`.
"""

import json
import os
import sys

import torch
from _repro_gate_digest import combine_digests, digest_tensors


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = torch.nn.Linear(4, 3)
        self.head = torch.nn.Linear(3, 1)

    def forward(self, *, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.body(x)))


def named_digests(values):
    names = [name for name, _ in MODEL.named_parameters()]
    return dict(zip(names, digest_tensors(list(values)), strict=True))


MODEL = Net()
loss_module = torch.nn.MSELoss()
optimizer = torch.optim.SGD(MODEL.parameters(), lr=0.1)
expected = []
for step in range(1, 4):
    batch = torch.full((2, 4), float(step))
    entry = {"inputs": combine_digests(digest_tensors([batch]))}
    if step == 1:
        entry["init"] = named_digests(MODEL.parameters())
    loss = loss_module(MODEL(x=batch), torch.zeros(2, 1))
    optimizer.zero_grad()
    loss.backward()
    entry["grads"] = named_digests(p.grad for p in MODEL.parameters())
    optimizer.step()
    entry["params"] = named_digests(MODEL.parameters())
    entry["loss"] = float.hex(loss.item())
    with torch.no_grad():
        MODEL(x=torch.ones(5, 4))  # evaluation: not a training input
    expected.append(entry)
with open(os.path.join(sys.argv[1], "expected.json"), "w") as handle:
    json.dump(expected, handle)
