"""Reproducible in place (on one day); a clock moved by more than a year changes the initial
parameters: the seed is the day's number."""

import datetime

import torch
from tiny import run_dir_path, train

torch.manual_seed(datetime.date.today().toordinal())  # the bug: seed from a constant
train(steps=4, checkpoint=run_dir_path("model.pt"))
