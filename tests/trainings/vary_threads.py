"""Reproducible in place; another CPU thread count changes the numbers from step 1: torch splits
a float sum over a few million values by thread, and one thread rounds it otherwise than two."""

import torch
from tiny import run_dir_path, train

torch.manual_seed(0)
scale = torch.rand(2_000_000).sum() / 2_000_000  # summed in one chunk per thread
train(steps=4, inputs=torch.randn(64, 8) * scale, checkpoint=run_dir_path("model.pt"))
