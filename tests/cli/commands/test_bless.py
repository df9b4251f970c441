"""`repro-gate bless`: a passing gate's run written as the golden file of its machine class,
an update said so, and a gate whose runs did not reproduce refused with its own exit code."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from helpers.manifest_docs import load_current

from repro_gate.cli.commands.bless import bless
from repro_gate.cli.main import main
from repro_gate.errors import EXIT_ERROR, EXIT_NOT_BLESSABLE, EXIT_PASS
from repro_gate.probe import PROBE_SUBDIR, TRAJECTORY_FILE

STEPS = [{"step": 1, "loss": (1.0).hex(), "params": {"w": "aa"}},
         {"step": 2, "loss": (0.5).hex(), "params": {"w": "bb"}}]


def passing_manifest(tmp_path: Path) -> Path:
    """A passing gate's manifest whose run A left its trajectory and one checkpoint."""
    run_dir = tmp_path / "out" / "runs" / "A"
    (run_dir / PROBE_SUBDIR).mkdir(parents=True)
    (run_dir / PROBE_SUBDIR / TRAJECTORY_FILE).write_text(
        "".join(json.dumps(step) + "\n" for step in STEPS))
    (run_dir / "work").mkdir()
    (run_dir / "work" / "model.bin").write_bytes(b"weights")
    document: dict[str, Any] = load_current()
    document["verdict"] = "pass"
    document["reasons"] = [{"code": "bitwise_equal", "message": "2 runs are bitwise equal"}]
    run = document["runs"][0]
    run["run_dir"] = str(run_dir)
    run["steps"] = len(STEPS)
    run["artifacts"] = [{"path": "model.bin", "bytes": 7,
                         "sha256": hashlib.sha256(b"weights").hexdigest()}]
    path = tmp_path / "out" / "manifest.json"
    path.write_text(json.dumps(document))
    return path


def test_a_passing_gate_is_blessed_then_updated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    manifest = passing_manifest(tmp_path)

    assert bless(manifest, None, "golden/") == EXIT_PASS
    first = capsys.readouterr().out.splitlines()
    assert bless(manifest, None, "golden/") == EXIT_PASS
    second = capsys.readouterr().out.splitlines()

    written = list((tmp_path / "golden").iterdir())
    assert len(written) == 1
    golden = json.loads(written[0].read_text())
    where = f"golden/{written[0].name}"
    assert first[0] == (f"repro-gate: wrote {where} (machine class {golden['machine_class']},"
                        " 2 steps, 1 artifacts)")
    assert first[1] == (f"  commit it: git add {where} && git commit -m 'Bless the golden"
                        " trajectory'")
    assert second[0].startswith(f"repro-gate: updated {where} ")


def test_a_gate_whose_runs_did_not_reproduce_is_not_blessed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps(load_current()))  # a fail: the runs diverged

    code = main(["bless", "--manifest", str(manifest), "--golden", "golden/"])

    assert code == EXIT_NOT_BLESSABLE
    assert capsys.readouterr().err == (
        f"repro-gate: error: {manifest}: its runs did not reproduce (verdict fail:"
        " artifact_different, trajectory_diverged); nothing blessed\n")
    assert not (tmp_path / "golden").exists()


def test_an_artifact_gone_from_the_run_directory_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    manifest = passing_manifest(tmp_path)
    (tmp_path / "out" / "runs" / "A" / "work" / "model.bin").unlink()

    assert main(["bless", "--manifest", str(manifest), "--golden", "golden/"]) == EXIT_ERROR
    assert "artifact model.bin of run A is no longer in" in capsys.readouterr().err


def test_without_a_manifest_the_last_gates_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)

    assert main(["bless"]) == EXIT_ERROR

    err = capsys.readouterr().err
    assert err.startswith("repro-gate: error: ") and err.count("\n") == 1
    assert str(tmp_path / "repro-gate-out" / "manifest.json") in err
