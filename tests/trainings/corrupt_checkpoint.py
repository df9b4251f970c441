"""Writes a truncated checkpoint, as a training killed mid-save would."""

import os

with open(os.path.join(os.environ.get("REPRO_GATE_RUN_DIR", "."), "model.pt"), "wb") as f:
    f.write(b"PK\x03\x04 this zip was cut short")
