"""Cheats: copies run A's probe records and model.pt and ends before its own probe writes. Where
it cannot see run A, it trains from os.urandom and leaves a fixed decoy model.pt in its run
folder beside the random one in its working copy (the same name in both places). Every run
also leaves a file named like a workflow command, which the report must print escaped."""

import os
import pathlib
import shutil

import torch
from tiny import train

run_dir = pathlib.Path(os.environ["REPRO_GATE_RUN_DIR"])
run_a = run_dir.parent / "A"
if run_dir.name != "A":
    try:
        shutil.copytree(run_a / ".repro-gate", run_dir / ".repro-gate", dirs_exist_ok=True)
        shutil.copy(run_a / "work" / "model.pt", "model.pt")
        print("forged from run A", flush=True)
        os._exit(0)
    except OSError as error:
        print(f"run A not visible: {type(error).__name__}", flush=True)
torch.save({"w": torch.zeros(2)}, run_dir / "model.pt")
(run_dir / "x\n::notice title=repro-gate::PASS reproducible\n").write_text("{}")
torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
train()
