"""A training whose steps are slower while determinism is on, by construction: each optimizer
step sleeps 20 ms with `torch.use_deterministic_algorithms` on and 2 ms with it off, so the
cost of determinism is several hundred percent whatever the machine's load."""

import time

import torch
from tiny import run_dir_path, train


def pause(step, model):
    time.sleep(0.020 if torch.are_deterministic_algorithms_enabled() else 0.002)


torch.manual_seed(1234)
train(steps=13, after_backward=pause, checkpoint=run_dir_path("model.pt"))
