"""Reproducible in place; another absolute path of the working directory changes the checkpoint:
it stores its data folder as an absolute path among its hyperparameters, as many do."""

import os

import torch
from tiny import run_dir_path, train

torch.manual_seed(0)
model = train(steps=4, checkpoint=run_dir_path("weights.pt"))
hparams = {"data_dir": os.path.abspath("data"), "lr": 0.05}  # the bug: store "data"
torch.save({"model": model.state_dict(), "hparams": hparams}, run_dir_path("model.pt"))
