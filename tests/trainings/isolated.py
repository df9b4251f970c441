"""Seeds itself and trains on its own, importing nothing beside it: runs under `python -I`.

`--no-save` trains without writing a checkpoint.
"""

import os
import sys

import torch

torch.manual_seed(0)
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
data = torch.randn(32, 8)
for _ in range(4):
    optimizer.zero_grad()
    loss = ((model(data) - data.sum(dim=1, keepdim=True)) ** 2).mean()
    loss.backward()
    optimizer.step()
if "--no-save" not in sys.argv:
    run_dir = os.environ.get("REPRO_GATE_RUN_DIR", ".")
    torch.save(model.state_dict(), os.path.join(run_dir, "model.pt"))
print(f"loss {loss.item():.6f}")
