"""`repro-gate fingerprint`: the console lines of a recorded fingerprint, this interpreter's own
facts, and a bad config stopping it before anything is collected."""

from __future__ import annotations

import copy
import platform
from pathlib import Path
from typing import Any

import pytest
from helpers.manifest_docs import load_current

from repro_gate.cli.commands.fingerprint import (
    DOCUMENT_FORMAT,
    describe,
    fingerprint,
    local_in_process,
)
from repro_gate.errors import ConfigError


def document() -> dict[str, Any]:
    manifest = load_current()
    return {"repro_gate_fingerprint": DOCUMENT_FORMAT, "config_hash": manifest["config_hash"],
            "fingerprint": copy.deepcopy(manifest["fingerprint"])}


def line(lines: list[str], prefix: str) -> str:
    return next(text for text in lines if text.startswith(prefix))


def test_a_recorded_fingerprint_reads_as_a_few_lines_per_category() -> None:
    recorded = document()

    lines = describe(recorded)

    assert lines[0] == f"config_hash  {recorded['config_hash']}"
    assert line(lines, "code") == ("code      2f9c1e0b7a6d on refs/pull/42/merge (clean), remote"
                                   " https://github.com/octo-org/trainer")
    assert line(lines, "data") == ("data      data/train.bin: 1 files, 52428800 bytes,"
                                   " c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00"
                                   "c0ffee00")
    assert line(lines, "env       torch") == (
        "env       torch 2.5.1+cu124 (CUDA 12.4, cuDNN 90100, NCCL 2.21.5), numpy 1.26.4")
    assert "env       no lockfile found" in lines
    assert line(lines, "random").startswith("random    gate seed 1234, ")
    assert "hardware  CPU AMD EPYC 7R32 x8" in lines
    assert line(lines, "hardware  GPU 0").startswith("hardware  GPU 0: NVIDIA A10G (sm ")
    assert lines[-1] == "hardware  driver 550.54.15, CUDA driver 12.4"


def test_what_is_unknown_or_absent_is_said_so() -> None:
    recorded = document()
    fp = recorded["fingerprint"]
    fp["code"] = {"commit": None, "reason": "not a git repository"}
    fp["data"] = {"paths": []}
    fp["hardware"] = {"cpu": {"model": "x", "count": 2}, "gpus": [], "gpu_reason": "no NVML"}
    fp["random"]["seed"] = None
    fp["env"]["lockfiles"] = [{"path": "uv.lock", "format": "uv", "packages": 3,
                               "hash_pinned": True}]
    fp["env"]["lock_mismatches"] = [{"name": "numpy", "installed": "2.0", "locked": ["1.26"],
                                     "lockfile": "uv.lock"}]

    lines = describe(recorded)

    assert "code      unknown: not a git repository" in lines
    assert "data      no data paths configured" in lines
    assert "env       lockfile uv.lock (uv, 3 packages): hash-pinned" in lines
    assert "env       numpy 2.0 installed, 1.26 locked in uv.lock" in lines
    assert line(lines, "random").startswith("random    gate seed none, ")
    assert lines[-1] == "hardware  no GPU: no NVML"


def test_this_interpreter_describes_itself_without_importing_torch() -> None:
    facts = local_in_process(import_torch=False)

    assert facts["python"]["version"] == platform.python_version()
    assert facts["packages"]["count"] > 0


def test_a_missing_config_file_stops_before_collecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError):
        fingerprint(tmp_path / "absent.yml", as_json=True)

    assert capsys.readouterr().out == ""
