"""Without torch the package imports, metric files compare, checkpoints are read tensor by tensor
(tests/compare/test_torch_reader.py has the detail), and broken ones are one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch

SCRIPT = """
import json, sys
sys.modules["torch"] = None  # any `import torch` now fails as if torch were not installed
from pathlib import Path
from repro_gate.compare import compare_artifact
from repro_gate.errors import GateError

folder = Path(sys.argv[1])
out = {"json": compare_artifact(folder / "m.json", folder / "m.json", "m.json", None)["status"]}
for name in ("model.pt", "model.safetensors"):
    try:
        compare_artifact(folder / name, folder / ("other-" + name), name, None)
    except GateError as error:
        out[name] = [error.kind, str(error)]
same = compare_artifact(folder / "real.pt", folder / "real.pt", "real.pt", None)
out["identical"] = [same["kind"], same["status"], same["note"]]
out["torch_loaded"] = sys.modules["torch"] is not None
print(json.dumps(out))
"""


def test_checkpoints_need_no_torch_and_broken_ones_say_why(tmp_path: Path) -> None:
    torch.save({"w": torch.ones(2)}, tmp_path / "real.pt")
    (tmp_path / "m.json").write_text('{"loss": 1}')
    (tmp_path / "model.pt").write_bytes(b"PK\x03\x04")
    (tmp_path / "model.safetensors").write_bytes(b"\0" * 8)
    (tmp_path / "other-model.pt").write_bytes(b"PK\x03\x04 other")
    (tmp_path / "other-model.safetensors").write_bytes(b"\1" * 8)

    completed = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )

    assert json.loads(completed.stdout) == {
        "json": "equal",
        "model.pt": [
            "checkpoint_unreadable",
            "cannot read checkpoint model.pt from run A: not a complete torch checkpoint"
            " (truncated zip?)",
        ],
        "model.safetensors": [
            "checkpoint_unreadable",
            "cannot read checkpoint model.safetensors from run A: header is not JSON"
            " (Expecting value: line 1 column 1 (char 0))",
        ],
        "identical": ["torch", "equal", "1 of 1 tensors bitwise equal (equal ones not listed)"],
        "torch_loaded": False,
    }
