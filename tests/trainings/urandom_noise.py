"""At step 3, OS entropy leaks into head.bias: no seed can fix that."""

import os

import torch
from tiny import run_dir_path, train

torch.manual_seed(0)  # the training seeds itself; the gate does not


def leak_entropy(step, model):
    if step == 3:
        noise = int.from_bytes(os.urandom(4), "little") / 2**32
        model.head.bias.grad += noise * 1e-3


train(after_backward=leak_entropy, checkpoint=run_dir_path("model.pt"))
