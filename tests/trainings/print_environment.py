"""Prints its whole environment, then trains reproducibly: what a careless training would log."""

import os

import torch
from tiny import run_dir_path, train

for name, value in sorted(os.environ.items()):
    print(f"{name}={value}")
torch.manual_seed(1234)
train(checkpoint=run_dir_path("model.pt"))
