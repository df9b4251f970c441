"""From its fifth call (step 5), the activation `body.1` adds a tiny OS-entropy constant to its
output: its input, and every module before it, are equal between runs, its output is not.

The constant is drawn in [0, 1) and scaled to 1e-7, and the targets sit near 1000, so the loss
(about 1e6, spaced 0.0625 apart in float32) rounds to the same bits in both runs while the model's
output and the gradients of `body.2` differ: the forward pass changed, not the backward pass.
The constant is added to tanh's input, so the elements near zero carry any change.
"""

import os

import torch
from cause_net import Net
from tiny import run_dir_path

NOISY_FROM_CALL = 5
SCALE = 1e-7


class TinyNoise(torch.nn.Module):
    """tanh of its input plus one constant from os.urandom from its fifth call (one call a step)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls < NOISY_FROM_CALL:
            return torch.tanh(x)
        # Added before tanh: the elements near zero keep any change, so a replay of this module
        # (the localisation run) never draws a constant that rounds away everywhere.
        return torch.tanh(x + int.from_bytes(os.urandom(4), "little") / 2**32 * SCALE)


torch.manual_seed(0)
model = Net(middle=TinyNoise())
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
data = torch.randn(64, 8).split(16)
for step in range(1, 13):
    x = data[(step - 1) % len(data)]
    y = x.sum(dim=1, keepdim=True) + 1000
    optimizer.zero_grad()
    loss = ((model(x) - y) ** 2).mean()
    loss.backward()
    optimizer.step()
torch.save(model.state_dict(), run_dir_path("model.pt"))
