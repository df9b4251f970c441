"""vary_time.py, after saying where it runs: its working directory and host name, what it reads
of the data and of the virtualenv, and whether it may write into the data."""

import os
import runpy
import socket

print(f"cwd={os.getcwd()} host={socket.gethostname()}", flush=True)
with open(os.path.join("data", "shard.txt")) as shard:
    venv = os.path.isfile(os.path.join(".venv", "pyvenv.cfg"))
    print(f"data={shard.read().strip()} venv={venv}", flush=True)
try:
    with open(os.path.join("data", "written.txt"), "w"):
        print("data=writable", flush=True)
except OSError:
    print("data=read-only", flush=True)
runpy.run_path("vary_time.py", run_name="__main__")
