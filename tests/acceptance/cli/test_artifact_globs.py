"""Artifact globs stay inside the run: bad globs are configuration errors, links out are not read.

Everything goes through the real `repro-gate check`; the trainings are a few lines of Python.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers.gate_cli import check

WRITE_MODEL = """\
import os
open(os.path.join(os.environ["REPRO_GATE_RUN_DIR"], "model.json"), "w").write('{"w": 1}')
open("ckpt.pt", "wb").write(b"not moved")
"""


@pytest.fixture
def layout(tmp_path: Path) -> tuple[Path, Path]:
    """A working directory `repo/work` beside `repo/shared/base.pt`, a file outside it."""
    workdir = tmp_path / "repo" / "work"
    workdir.mkdir(parents=True)
    (workdir / "train.py").write_text(WRITE_MODEL)
    shared = tmp_path / "repo" / "shared"
    shared.mkdir()
    (shared / "base.pt").write_bytes(b"outside the workdir")
    return workdir, shared / "base.pt"


@pytest.mark.parametrize(("glob", "rule"), [
    ("/etc/passwd", "absolute paths are not allowed"),
    ("../../../../etc/passwd", "'..' is not allowed"),
    ("../shared/*.pt", "'..' is not allowed"),
    ("ckpt**.pt", "'**' must be a whole path component"),
])
def test_bad_glob_is_one_line_and_moves_nothing(
    layout: tuple[Path, Path], glob: str, rule: str
) -> None:
    workdir, outside = layout
    result = check(workdir, "--no-cost", "-a", glob, "--", sys.executable, "train.py")
    assert result.exit_code == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [
        f"repro-gate: error: artifacts: glob {glob!r} {_rule_text(rule)}"]
    assert outside.read_bytes() == b"outside the workdir"
    assert not (workdir / "repro-gate-out" / "runs" / "A").exists(), "nothing may run"
    assert not (workdir / "ckpt.pt").exists(), "nothing may run"
    assert result.manifest["reasons"][0]["code"] == "config"


def _rule_text(rule: str) -> str:
    return {
        "absolute paths are not allowed":
            "must be relative to the run directory (absolute paths are not allowed)",
        "'..' is not allowed": "must stay inside the run directory ('..' is not allowed)",
        "'**' must be a whole path component":
            "is not a valid pattern ('**' must be a whole path component, as in 'ckpt/**/*.pt')",
    }[rule]


def test_bad_glob_in_the_config_file(layout: tuple[Path, Path]) -> None:
    workdir, outside = layout
    (workdir / ".repro-gate.yml").write_text(
        "command: python train.py\nartifacts: ['model.json', '../shared/*.pt']\n")
    result = check(workdir, "--no-cost")
    assert result.exit_code == 2
    assert result.stderr.strip() == ("repro-gate: error: artifacts: glob '../shared/*.pt' must"
                                     " stay inside the run directory ('..' is not allowed)")
    assert outside.is_file()


LINK_OUT = """\
import os
run_dir = os.environ["REPRO_GATE_RUN_DIR"]
os.symlink(os.environ["OUTSIDE"], os.path.join(run_dir, "metrics"))
os.symlink(os.path.join(os.environ["OUTSIDE"], "secret.json"), os.path.join(run_dir, "s.json"))
open(os.path.join(run_dir, "model.json"), "w").write('{"w": 1}')
"""


def test_symlink_out_of_the_run_is_reported_and_never_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.json").write_text('{"token": "SECRET-VALUE"}')
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "train.py").write_text(LINK_OUT)
    result = check(workdir, "--no-cost", "--json", "--env", f"OUTSIDE={outside}",
                   "-a", "model.json", "-a", "*.json", "-a", "metrics/*.json",
                   "--", sys.executable, "train.py")
    output = result.stdout + result.stderr
    assert "SECRET-VALUE" not in output
    assert "SECRET-VALUE" not in (workdir / "repro-gate-out" / "manifest.json").read_text()
    for run in result.manifest["runs"]:
        assert [a["path"] for a in run["artifacts"]] == ["model.json"]
    warnings = [line for line in result.stderr.splitlines() if "leads outside" in line]
    assert any("metrics/secret.json" in line for line in warnings), result.stderr
    assert any(line.endswith("s.json leads outside the run directory (symlink); not collected")
               for line in warnings), result.stderr
    # The links out were the only match of `metrics/*.json`: that glob matched nothing.
    assert result.exit_code == 2, output
    assert "artifact glob 'metrics/*.json' matched no file" in output


def test_config_file_over_the_alias_budget(tmp_path: Path) -> None:
    levels = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for index in range(1, 9):
        name, previous = chr(ord("a") + index), chr(ord("a") + index - 1)
        levels.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 10)}]")
    (tmp_path / ".repro-gate.yml").write_text("\n".join(levels) + "\n")
    result = check(tmp_path, "--no-cost")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"repro-gate: error: config file {tmp_path / '.repro-gate.yml'}: YAML aliases expand it"
        " past 1,000,000 nodes"]
