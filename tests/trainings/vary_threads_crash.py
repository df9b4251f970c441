"""Reproducible in place; exits with an error when its thread count is pinned by OMP_NUM_THREADS
(a run that varies the thread count then fails, which says nothing of the numbers)."""

import os
import sys

import torch
from tiny import run_dir_path, train

if "OMP_NUM_THREADS" in os.environ:
    sys.exit("refusing to train with a pinned thread count")
torch.manual_seed(0)
train(steps=4, checkpoint=run_dir_path("model.pt"))
