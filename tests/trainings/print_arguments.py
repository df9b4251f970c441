"""Prints the arguments it was given, then trains reproducibly."""

import sys

import torch
from tiny import run_dir_path, train

print("arguments:", sys.argv[1:])
torch.manual_seed(1234)
train(checkpoint=run_dir_path("model.pt"))
