"""A module that counts its own hooks at every call and keeps the count in a buffer."""

import pickle
import sys
from pathlib import Path

import torch


class Counting(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 4)
        self.register_buffer("hooks_seen", torch.zeros(4, dtype=torch.int64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        counts = [len(self._forward_pre_hooks), len(self._forward_hooks),
                  len(self._backward_hooks), len(self._forward_pre_hooks_with_kwargs)]
        self.hooks_seen += torch.tensor(counts)
        return self.layer(x)


torch.manual_seed(19)
out = Path(sys.argv[1])
model = Counting()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data = torch.randn(8, 4)
for step in range(1, 5):
    optimizer.zero_grad()
    loss = model(data).pow(2).mean()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.8f} hooks {model.hooks_seen.tolist()}")
print("attributes", sorted(vars(model)))
print("state", list(model.state_dict()))
print("pickled bytes", len(pickle.dumps(model.state_dict())))
torch.save(model.state_dict(), out / "state.pt")
torch.save(model, out / "model.pt")
