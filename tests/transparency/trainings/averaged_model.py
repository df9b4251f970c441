"""Stochastic weight averaging with `torch.optim.swa_utils.AveragedModel` (it deep-copies)."""

import sys
from pathlib import Path

import torch
from torch.optim.swa_utils import AveragedModel, update_bn

torch.manual_seed(13)
out = Path(sys.argv[1])
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
                            torch.nn.Linear(8, 1))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
batches = [(torch.randn(16, 4), torch.randn(16, 1)) for _ in range(4)]
swa = None
for step in range(1, 9):
    data, target = batches[step % len(batches)]
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(data), target)
    loss.backward()
    optimizer.step()
    if step == 4:
        swa = AveragedModel(model)
    elif swa is not None:
        swa.update_parameters(model)
    print(f"step {step} loss {loss.item():.8f}")
update_bn([data for data, _ in batches], swa)
print("averaged", int(swa.n_averaged))
torch.save(swa.state_dict(), out / "swa_state.pt")
torch.save(swa, out / "swa_model.pt")
