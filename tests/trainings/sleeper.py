"""Hangs, with a child process, until it is killed; leaves both pids for the test to check."""

import os
import subprocess
import sys
import time

child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(os.path.join(os.environ["REPRO_GATE_RUN_DIR"], "pids.txt"), "w") as f:
    f.write(f"{os.getpid()} {child.pid}\n")
print("training...", flush=True)
time.sleep(600)
