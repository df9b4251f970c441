"""The golden document keeps every step a run recorded, an overflowed loss included."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.paths import ROOT

from repro_gate.golden import document

FINGERPRINT = json.loads((ROOT / "tests/fixtures/manifest/manifest-v3.json").read_text())[
    "fingerprint"]


def test_an_infinite_loss_keeps_its_bits_and_has_no_value(tmp_path: Path) -> None:
    # A gradient scaler's skipped step: the loss overflowed to inf; JSON has no inf.
    trajectory = [{"step": 1, "loss": (1.5).hex(), "params": {"w": "ab"}},
                  {"step": 2, "loss": float("inf").hex(), "params": {"w": "cd"}}]
    golden = document.build(document.RunData(trajectory, FINGERPRINT, [], "gate"), "now")
    path = tmp_path / "golden.json"
    document.write(golden, path)
    rows = document.read(path)["steps"]
    assert [(row[document.STEP], row[document.LOSS], row[document.VALUE]) for row in rows] == [
        (1, "0x1.8p+0", 1.5), (2, "inf", None)]
