"""Trains like `localise_noisy_module.py plain` (a forward divergence in `body.1` from step 3),
but its third launch in one gate, the localisation run, crashes before training."""

import os
import runpy
import sys
from pathlib import Path

# Outside the working directory and the gate's output (a run sees neither another run's folder
# nor what another run wrote), so every run of the gate sees the same count.
launches = Path(os.environ["LAUNCHES_FILE"])
count = len(launches.read_text()) if launches.exists() else 0
launches.write_text("x" * (count + 1))
if count == 2:
    sys.exit("simulated crash of the third run")
sys.argv = [str(Path(__file__).with_name("localise_noisy_module.py")), "plain"]
runpy.run_path(sys.argv[0], run_name="__main__")
