"""Trains reproducibly from the seed in prepared_data.txt (written by prepare_data.py)."""

from pathlib import Path

import torch
from tiny import run_dir_path, train

torch.manual_seed(int(Path("prepared_data.txt").read_text()))
train(checkpoint=run_dir_path("model.pt"))
