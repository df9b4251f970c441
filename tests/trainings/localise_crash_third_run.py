"""Trains like `localise_noisy_module.py plain` (a forward divergence in `body.1` from step 3),
but its third launch in one gate, the localisation run, crashes before training."""

import os
import runpy
import sys
from pathlib import Path

# Beside the gate's run directories, so every run of the gate sees the same count.
launches = Path(os.environ.get("REPRO_GATE_RUN_DIR", "run")).parent / "launches.txt"
count = len(launches.read_text()) if launches.exists() else 0
launches.write_text("x" * (count + 1))
if count == 2:
    sys.exit("simulated crash of the third run")
sys.argv = [str(Path(__file__).with_name("localise_noisy_module.py")), "plain"]
runpy.run_path(sys.argv[0], run_name="__main__")
