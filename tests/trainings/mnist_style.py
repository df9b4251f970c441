"""An MNIST-style tiny training shared by the mnist_* trainings: a small MLP on 28x28 "digits",
with a little noise drawn by `torch.randn` in `forward()` (as a noise layer or dropout would).

The data is computed, not drawn, so only the model's initialisation and the noise use torch's
global generator: run twice without seeding, the checkpoints differ.
"""

import torch
from tiny import run_dir_path


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = torch.nn.Linear(28 * 28, 32)
        self.out = torch.nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        x = x + 0.01 * torch.randn(x.shape)  # noise drawn from torch's global generator
        return self.out(torch.relu(self.hidden(x)))


def digits(count: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """`count` computed 28x28 images and their labels (no generator involved)."""
    index = torch.arange(count * 28 * 28, dtype=torch.float32)
    images = torch.sin(index * 0.37).reshape(count, 1, 28, 28)
    labels = torch.arange(count) % 10
    return images, labels


def train(steps: int = 4) -> None:
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    images, labels = digits()
    for step in range(steps):
        x, y = images[step * 16:(step + 1) * 16], labels[step * 16:(step + 1) * 16]
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
    torch.save(model.state_dict(), run_dir_path("model.pt"))
