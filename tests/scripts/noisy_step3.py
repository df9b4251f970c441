"""Training whose third step adds noise from os.urandom: runs diverge from step 3 on."""

import os

import torch
from torch import nn

torch.manual_seed(0)
model = nn.Linear(4, 2)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1, 6):
    x = torch.randn(8, 4)
    if step == 3:
        x = x + int.from_bytes(os.urandom(4), "little") / 2**32
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("finished all steps")
