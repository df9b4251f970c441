"""Seeds itself and trains: reproducible with or without the gate."""

import torch
from tiny import run_dir_path, train

torch.manual_seed(1234)
train(checkpoint=run_dir_path("model.pt"))
