"""Seeds itself and updates its weights by hand, without an optimizer: the probe sees no step."""

import torch
from tiny import TinyNet, run_dir_path

torch.manual_seed(0)
model = TinyNet()
data = torch.randn(32, 8)
for _ in range(4):
    model.zero_grad()
    loss = ((model(data) - data.sum(dim=1, keepdim=True)) ** 2).mean()
    loss.backward()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter -= 0.05 * parameter.grad
torch.save(model.state_dict(), run_dir_path("model.pt"))
