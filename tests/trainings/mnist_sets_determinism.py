"""The MNIST-style training that seeds itself and switches deterministic algorithms on itself."""

import torch
from mnist_style import train

torch.manual_seed(0)
torch.use_deterministic_algorithms(True)
train()
