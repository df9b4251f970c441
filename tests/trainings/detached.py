"""Starts a grandchild in its own session that keeps printing, trains three steps, then hangs in
the runs named by HANG_IN (default: every run) and ends in the others; leaves every pid in the
run directory for the test to check."""

import os
import subprocess
import sys
import time

run_dir = os.environ.get("REPRO_GATE_RUN_DIR", ".")
grandchild = subprocess.Popen(
    [sys.executable, "-c",
     "import os, sys, time\n"
     "open(sys.argv[1], 'w').write(str(os.getpid()))\n"
     "while True:\n    print('grandchild tick', flush=True)\n    time.sleep(0.2)\n",
     os.path.join(run_dir, "grandchild.pid")],
    start_new_session=True,
)
with open(os.path.join(run_dir, "training.pid"), "w") as f:
    f.write(str(os.getpid()))

import torch  # noqa: E402 - after the grandchild, so it runs from the start
from tiny import TinyNet  # noqa: E402

torch.manual_seed(0)
model = TinyNet()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for _ in range(3):
    x = torch.randn(16, 8)
    optimizer.zero_grad()
    loss = ((model(x) - x.sum(dim=1, keepdim=True)) ** 2).mean()
    loss.backward()
    optimizer.step()
print("training started", flush=True)
if os.path.basename(run_dir) in os.environ.get("HANG_IN", "A,B").split(","):
    time.sleep(600)
