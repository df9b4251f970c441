"""The MNIST-style training that seeds torch itself before building its model."""

import torch
from mnist_style import train

torch.manual_seed(0)
train()
