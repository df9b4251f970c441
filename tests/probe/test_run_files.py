"""A run's files read back inside its run folder, never through a link: real files, links and
FIFOs a training could leave."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from repro_gate import probe
from repro_gate.errors import EXIT_TAMPERED, ErrorKind, GateError
from repro_gate.probe import PROBE_SUBDIR, STATUS_FILE, TRAJECTORY_FILE, run_files


def run_with_records(tmp_path: Path) -> Path:
    run_dir = tmp_path / "runs" / "B"
    (run_dir / PROBE_SUBDIR).mkdir(parents=True)
    (run_dir / PROBE_SUBDIR / TRAJECTORY_FILE).write_text('{"step": 1}\n{"step": 2}\n')
    return run_dir


def tampered(run_dir: Path, rel: str) -> GateError:
    with pytest.raises(GateError) as raised:
        run_files.read_bytes(run_dir, rel)
    assert (raised.value.kind, raised.value.exit_code) == (ErrorKind.RUN_TAMPERED, EXIT_TAMPERED)
    return raised.value


def test_a_file_is_read_from_an_offset_and_a_missing_one_is_none(tmp_path: Path) -> None:
    run_dir = run_with_records(tmp_path)
    rel = f"{PROBE_SUBDIR}/{TRAJECTORY_FILE}"

    assert run_files.read_bytes(run_dir, rel) == b'{"step": 1}\n{"step": 2}\n'
    assert run_files.read_bytes(run_dir, rel, offset=12) == b'{"step": 2}\n'
    assert run_files.read_bytes(run_dir, f"{PROBE_SUBDIR}/absent.json") is None
    assert run_files.read_bytes(run_dir, "absent/status.json") is None
    assert run_files.names(run_dir, PROBE_SUBDIR) == [TRAJECTORY_FILE]
    assert run_files.names(run_dir, "absent") == []


def test_a_probe_folder_linked_to_another_runs_is_run_tampered_naming_it(tmp_path: Path) -> None:
    run_a = run_with_records(tmp_path / "a")
    run_dir = tmp_path / "runs" / "B"
    run_dir.mkdir(parents=True)
    os.symlink(run_a / PROBE_SUBDIR, run_dir / PROBE_SUBDIR)

    error = tampered(run_dir, f"{PROBE_SUBDIR}/{TRAJECTORY_FILE}")

    assert str(run_dir / PROBE_SUBDIR) in error.message
    with pytest.raises(GateError):
        probe.read_trajectories(run_dir)
    with pytest.raises(GateError):
        probe.read_json(run_dir, STATUS_FILE)


def test_a_linked_file_a_fifo_and_a_way_out_are_run_tampered(tmp_path: Path) -> None:
    run_dir = run_with_records(tmp_path)
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"stopped": None}))
    os.symlink(secret, run_dir / PROBE_SUBDIR / STATUS_FILE)
    os.mkfifo(run_dir / PROBE_SUBDIR / "alerts.json")  # would block a plain open()

    assert str(run_dir / PROBE_SUBDIR / STATUS_FILE) in tampered(
        run_dir, f"{PROBE_SUBDIR}/{STATUS_FILE}").message
    assert "not a regular file" in tampered(run_dir, f"{PROBE_SUBDIR}/alerts.json").message
    assert "leads out of the run folder" in tampered(run_dir, "../A/model.pt").message
    assert "leads out of the run folder" in tampered(run_dir, str(secret)).message


def test_a_file_is_rewritten_in_place_never_through_a_link(tmp_path: Path) -> None:
    run_dir = run_with_records(tmp_path)
    rel = f"{PROBE_SUBDIR}/{TRAJECTORY_FILE}"
    elsewhere = tmp_path / "host.json"
    elsewhere.write_text("{}")
    os.symlink(elsewhere, run_dir / PROBE_SUBDIR / "linked.json")

    run_files.write_bytes(run_dir, rel, b"{}\n")

    assert (run_dir / rel).read_bytes() == b"{}\n"
    with pytest.raises(GateError):
        run_files.write_bytes(run_dir, f"{PROBE_SUBDIR}/linked.json", b"changed")
    assert elsewhere.read_text() == "{}"
