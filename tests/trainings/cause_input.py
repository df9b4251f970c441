"""From step 2, each batch is 16 rows sampled by a generator seeded from os.urandom: the input
batches differ between runs from step 2 on (step 1 takes the first rows, in order)."""

import os
import random

import torch
from cause_net import train

rows = torch.randn(64, 8)
sampler = random.Random(os.urandom(8))  # the bug: an RNG the gate cannot seed


def batch(step):
    picked = range(16) if step == 1 else sampler.sample(range(len(rows)), 16)
    return rows[list(picked)]


train(batches=batch)
