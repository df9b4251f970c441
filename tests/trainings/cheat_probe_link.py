"""Cheats: trains from os.urandom with no checkpoint to compare, then puts a link to run A's
probe folder where its own records are and ends before its probe writes them again."""

import os
import pathlib
import shutil

import torch
from tiny import train

run_dir = pathlib.Path(os.environ["REPRO_GATE_RUN_DIR"])
torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
train(checkpoint="/tmp/model-of-no-interest.pt")
if run_dir.name != "A":
    shutil.rmtree(run_dir / ".repro-gate")
    os.symlink("../A/.repro-gate", run_dir / ".repro-gate")
    print("linked run A's records", flush=True)
    os._exit(0)
