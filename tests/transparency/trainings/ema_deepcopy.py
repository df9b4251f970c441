"""Keeps an exponential moving average of the model in a `copy.deepcopy` made mid-training."""

import copy
import sys
from pathlib import Path

import torch

torch.manual_seed(11)
out = Path(sys.argv[1])
model = torch.nn.Sequential(torch.nn.Linear(5, 10), torch.nn.ReLU(), torch.nn.Linear(10, 2))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
data, target = torch.randn(24, 5), torch.randint(0, 2, (24,))
ema = None
for step in range(1, 7):
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(data), target)
    loss.backward()
    optimizer.step()
    if ema is None:  # after the model's first forward call and step
        ema = copy.deepcopy(model)
        ema.requires_grad_(False)
    with torch.no_grad():
        for average, current in zip(ema.parameters(), model.parameters(), strict=True):
            average.mul_(0.9).add_(current, alpha=0.1)
    print(f"step {step} loss {loss.item():.8f}")
snapshot = copy.deepcopy(model)
print("snapshot equal:", all(torch.equal(a, b) for a, b in
                             zip(snapshot.parameters(), model.parameters(), strict=True)))
torch.save(ema.state_dict(), out / "ema_state.pt")
torch.save(ema, out / "ema_model.pt")
