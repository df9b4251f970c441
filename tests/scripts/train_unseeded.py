"""A small unseeded training loop. The optimizer lists the head before the encoder and also holds
a parameter that belongs to no module. Prints the last loss's exact bits."""

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.head = nn.Linear(16, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))


model = Net()
temperature = nn.Parameter(torch.ones(()))
optimizer = torch.optim.Adam(
    [
        {"params": list(model.head.parameters())},
        {"params": list(model.encoder.parameters())},
        {"params": [temperature]},
    ],
    lr=1e-2,
)
for _ in range(5):
    x = torch.randn(32, 8)
    loss = (model(x) * temperature - x.sum(dim=1, keepdim=True)).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print("last loss", float.hex(loss.item()))
