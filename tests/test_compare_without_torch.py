"""Without torch the package imports, metric files compare, identical checkpoints pass by bytes,
and differing checkpoints say what to install."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
same = compare_artifact(folder / "model.pt", folder / "model.pt", "model.pt", None)
out["identical"] = [same["kind"], same["status"], same["note"]]
out["torch_loaded"] = sys.modules["torch"] is not None
print(json.dumps(out))
"""


def test_checkpoints_need_torch_and_say_how_to_install_it(tmp_path: Path) -> None:
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
            "missing_dependency",
            "comparing model.pt tensor by tensor needs torch: pip install 'repro-gate[torch]'",
        ],
        "model.safetensors": [
            "missing_dependency",
            "comparing model.safetensors tensor by tensor needs torch: "
            "pip install 'repro-gate[torch]'",
        ],
        "identical": [
            "bytes",
            "equal",
            "identical bytes; tensors not inspected because torch is not installed"
            " (pip install 'repro-gate[torch]')",
        ],
        "torch_loaded": False,
    }
