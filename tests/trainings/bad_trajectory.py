"""Ends cleanly but leaves a probe trajectory that is not UTF-8: a real input the gate does not
expect, which must end as one line and an `internal` error manifest."""

import os

probe_dir = os.path.join(os.environ["REPRO_GATE_RUN_DIR"], ".repro-gate")
os.makedirs(probe_dir, exist_ok=True)
with open(os.path.join(probe_dir, "trajectory.jsonl"), "ab") as f:
    f.write(b'{"step": 1, "loss": "\xff"}\n')
print("done")
