"""An error after the verdict (a record that fails its schema, a write that fails) is exit 2
with an error record in place, never the verdict's exit code with no record."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers.gate_cli import assert_one_line_error, check

from repro_gate.launch import namespaces

# Writes its result, and at the end of every run leaves files that break what the gate records:
# an alert the manifest cannot hold (its line is not a number), or a directory where the
# manifest goes. The probe is not loaded (-I), so it does not rewrite the alerts.
TRAINING = """\
import json, os, sys
run_dir = os.environ["REPRO_GATE_RUN_DIR"]
with open(os.path.join(run_dir, "result.txt"), "w") as out:
    out.write("42\\n")
if sys.argv[1] == "alert":
    os.makedirs(os.path.join(run_dir, ".repro-gate"), exist_ok=True)
    with open(os.path.join(run_dir, ".repro-gate", "alerts.json"), "w") as out:
        json.dump([{"op": "scatter_add_", "file": "train.py", "line": "seven"}], out)
else:
    os.makedirs(os.path.join(sys.argv[2], "manifest.json", "in-the-way"), exist_ok=True)
"""


def gate(project: Path, *args: str):
    (project / "train.py").write_text(TRAINING)
    return check(project, "--no-cost", "--artifacts", "result.txt", "--",
                 sys.executable, "-I", "train.py", *args)


def test_a_manifest_that_fails_its_schema_is_replaced_by_a_valid_error_record(
        tmp_path: Path) -> None:
    # Its own gate: runs that leave an alert the manifest cannot hold.
    result = gate(tmp_path, "alert")
    manifest = assert_one_line_error(result, "manifest_invalid", "manifest.invalid.json")
    assert len(manifest["reasons"]) == 1
    assert (tmp_path / "repro-gate-out" / "manifest.invalid.json").is_file()


def test_a_manifest_that_cannot_be_written_is_exit_2_with_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Its own gate: runs that leave a directory where the manifest goes. In its own namespaces
    # the training could not reach the gate's output folder at all.
    monkeypatch.setenv(namespaces.ENV_NAMESPACES, "off")
    out = tmp_path / "repro-gate-out"
    result = gate(tmp_path, "block", str(out))
    output = result.stdout + result.stderr
    assert result.exit_code == 2, output
    assert "Traceback" not in output
    (line,) = [line for line in result.stderr.splitlines() if "manifest.json" in line]
    assert line.startswith("repro-gate: error: manifest.json was not written: ")
    assert "the error manifest was not written either" in line
