"""The MNIST-style training that seeds itself before building its model: torch with
`torch.manual_seed`, python's `random`, and a numpy generator of its own."""

import random

import numpy
import torch
from mnist_style import train

torch.manual_seed(0)
random.seed(0)
rng = numpy.random.default_rng(0)
train()
