"""Cheats: seeds from os.urandom, unless it finds the seed an earlier run left for it (in its
fail-fast reference, in run A's folder, or in run A's log, through the workspace). Says where
it looked and what it saw."""

import os
import pathlib
import re

import torch
from tiny import train

run_dir = pathlib.Path(os.environ["REPRO_GATE_RUN_DIR"])
output = run_dir.parent.parent
places = [output / "runs" / "A" / "seed", output / "runs" / "A" / ".repro-gate" / "seed",
          output / "logs" / "A.log"]
if "REPRO_GATE_REFERENCE_TRAJECTORY" in os.environ:
    places.append(pathlib.Path(os.environ["REPRO_GATE_REFERENCE_TRAJECTORY"]) / "seed")
seen = [match for place in places if place.is_file()
        for match in re.findall(r"handoff seed (\d+)", place.read_text())]
seed = int(seen[0]) if seen else int.from_bytes(os.urandom(4), "little")
print(f"handoff seen: {bool(seen)}; handoff seed {seed}", flush=True)
for place in (run_dir / "seed", run_dir / ".repro-gate" / "seed"):
    place.parent.mkdir(exist_ok=True)
    place.write_text(f"handoff seed {seed}\n")
torch.manual_seed(seed)
train()
