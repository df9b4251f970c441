"""Parsing stays bounded: a YAML alias bomb is compared as bytes in little memory, and a
truncated checkpoint is one line that says so. Through the real `repro-gate check`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from helpers.gate_cli import check

MAX_PEAK_RSS_MB = 300


def alias_bomb(levels: int = 9) -> str:
    """A few hundred bytes whose aliases expand to 10**levels strings."""
    lines = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for index in range(1, levels):
        name, previous = chr(ord("a") + index), chr(ord("a") + index - 1)
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 10)}]")
    return "\n".join(lines) + "\n"


WRITE_BOMB = """\
import os, shutil
shutil.copy("bomb.yaml", os.path.join(os.environ["REPRO_GATE_RUN_DIR"], "metrics.yaml"))
"""

# The gate runs in a fresh interpreter that reports the peak RSS of its children (the gate and
# the trainings it waited for), so earlier tests in this process do not count.
MEASURE = """\
import resource, subprocess, sys
completed = subprocess.run(sys.argv[1:], capture_output=True, text=True)
sys.stderr.write(completed.stderr)
print(completed.stdout)
print("peak_kb", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
sys.exit(completed.returncode)
"""


def test_yaml_alias_bomb_is_compared_as_bytes_in_bounded_memory(tmp_path: Path) -> None:
    (tmp_path / "bomb.yaml").write_text(alias_bomb())
    assert len(alias_bomb()) < 500
    (tmp_path / "train.py").write_text(WRITE_BOMB)
    gate = [sys.executable, "-m", "repro_gate", "check", "--quiet", "--json", "--no-cost",
            "-a", "metrics.yaml", "--", sys.executable, "train.py"]
    completed = subprocess.run([sys.executable, "-c", MEASURE, *gate], cwd=tmp_path,
                               capture_output=True, text=True, timeout=240, check=False)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    manifest_text, _, peak = completed.stdout.rpartition("peak_kb ")
    peak_mb = int(peak) / 1024
    assert peak_mb < MAX_PEAK_RSS_MB, f"peak RSS {peak_mb:.0f} MB"
    (item,) = json.loads(manifest_text)["comparison"]["artifacts"]
    assert (item["kind"], item["status"]) == ("bytes", "equal")
    assert item["note"] == ("YAML over the parsing budget (YAML aliases expand it past"
                            " 1,000,000 nodes); compared by bytes")


TRUNCATE = """\
import os, torch
path = os.path.join(os.environ["REPRO_GATE_RUN_DIR"], "model.pt")
torch.save({"w": torch.arange(4096.0)}, path)
data = open(path, "rb").read()
open(path, "wb").write(data[: len(data) // 2])
"""


def test_truncated_checkpoint_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRUNCATE)
    result = check(tmp_path, "--no-cost", "-a", "model.pt", "--", sys.executable, "train.py")
    assert result.exit_code == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    expected = ("cannot read checkpoint model.pt from run A: not a complete torch checkpoint"
                " (truncated zip?)")
    assert result.manifest["reasons"][0] == {"code": "checkpoint_unreadable", "message": expected}
    assert expected in result.stdout
