"""Reproducible in place; listing its shards in another order changes the batches from step 1:
they are read in `os.listdir` order, the same twice on one disk, another on another. The shards
are files of the working directory (`python vary_listing.py --write-shards` writes them)."""

import os
import sys

import torch
from tiny import run_dir_path, train

if "--write-shards" in sys.argv:
    os.makedirs("shards", exist_ok=True)
    for index in range(8):
        torch.save(torch.full((8, 8), index / 8), os.path.join("shards", f"shard-{index}.pt"))
    sys.exit(0)
torch.manual_seed(0)
rows = [torch.load(os.path.join("shards", name)) for name in os.listdir("shards")]  # the bug
train(steps=4, inputs=torch.cat(rows), checkpoint=run_dir_path("model.pt"))
