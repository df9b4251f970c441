"""Hangs, with a child process, until it is killed."""

import subprocess
import sys
import time

subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
print("training...", flush=True)
time.sleep(600)
