"""Every command that reads a manifest, run as a user would: same versions rule, one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.manifest_docs import as_v1, as_v2, write_json

from repro_gate import manifest


def repro_gate(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`repro-gate ARGS` in a fresh process, without the CI environment of the machine."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "INPUT_", "REPRO_GATE_"))}
    return subprocess.run([sys.executable, "-m", "repro_gate", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize(
    "command",
    [
        ["diff", "{path}", "{path}"],
        ["compare", "{path}", "{path}"],
        ["report", "--manifest", "{path}", "--repo", "octo-org/trainer"],
        ["push", "--manifest", "{path}", "--url", "http://127.0.0.1:9"],
    ],
    ids=lambda command: command[0],
)
def test_a_newer_manifest_is_refused_in_one_line(
    tmp_path: Path, manifest_current: dict[str, Any], command: list[str]
) -> None:
    path = write_json(tmp_path / "manifest.json", {**manifest_current, "schema_version": 99})
    before = path.read_bytes()
    done = repro_gate(*(arg.format(path=path) for arg in command), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        f"repro-gate: error: {path}: schema_version 99 is newer than this repro-gate"
        f" understands ({manifest.SCHEMA_VERSION}.{manifest.SCHEMA_MINOR}); upgrade repro-gate\n")
    assert path.read_bytes() == before


def test_compare_reads_a_v1_manifest_as_its_v2_twin(
    tmp_path: Path, manifest_current: dict[str, Any]
) -> None:
    v1 = write_json(tmp_path / "v1.json", as_v1(manifest_current))
    v2 = write_json(tmp_path / "v2.json", as_v2(manifest_current))
    across = repro_gate("compare", "--json", str(v1), str(v2), cwd=tmp_path)
    same_version = repro_gate("compare", "--json", str(v2), str(v2), cwd=tmp_path)
    assert across.returncode == 0, across.stderr
    assert across.stdout == same_version.stdout
    assert '"verdict": "pass"' in across.stdout


def test_diff_says_a_v1_manifest_has_no_fingerprint(
    tmp_path: Path, manifest_current: dict[str, Any]
) -> None:
    v1 = write_json(tmp_path / "v1.json", as_v1(manifest_current))
    v2 = write_json(tmp_path / "v2.json", manifest_current)
    done = repro_gate("diff", str(v2), str(v1), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == (
        f"repro-gate: error: {v1}: manifest (schema_version 1) has no fingerprint\n")


def test_check_refuses_a_newer_baseline_before_any_run(
    tmp_path: Path, manifest_current: dict[str, Any]
) -> None:
    baseline = write_json(tmp_path / "baseline.json", {**manifest_current, "schema_version": 99})
    done = repro_gate("check", "--quiet", "--baseline", str(baseline), "--",
                      sys.executable, "-c", "pass", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    written = manifest.read(tmp_path / "repro-gate-out" / manifest.MANIFEST_NAME)
    assert [reason["code"] for reason in written["reasons"]] == ["manifest_version"]
    assert written["runs"] == []
