"""Saves the whole model (`torch.save(model)`), not its state_dict, then loads it back."""

import sys
from pathlib import Path

import torch

torch.manual_seed(7)
out = Path(sys.argv[1])
model = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data, target = torch.randn(32, 6), torch.randn(32, 1)
for step in range(1, 6):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(data), target)
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.8f}")
torch.save(model, out / "model.pt")
loaded = torch.load(out / "model.pt", weights_only=False)
print("reloaded loss", f"{torch.nn.functional.mse_loss(loaded(data), target).item():.8f}")
print("modules", [name for name, _ in loaded.named_modules()])
