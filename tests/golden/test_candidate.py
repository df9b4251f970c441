"""A run's candidate golden file in the output directory: written where CI uploads it, removed
when stale, and a failure to write it only a warning."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.paths import ROOT

from repro_gate.golden import document
from repro_gate.golden.candidate import path_of, remove_stale, write_candidate

FINGERPRINT = json.loads((ROOT / "tests/fixtures/manifest/manifest-v3.json").read_text())[
    "fingerprint"]


def golden() -> dict:
    trajectory = [{"step": 1, "loss": (0.75).hex(), "inputs": "i", "params": {"w": "a"},
                   "grads": {"w": "g"}, "init": {"w": "0"}}]
    return document.build(document.RunData(trajectory, FINGERPRINT, [], "trainer"), "now")


def test_the_candidate_is_named_by_its_machine_class(tmp_path: Path) -> None:
    assert path_of(tmp_path, "gpu-a10g-x1") == tmp_path / "golden" / "gpu-a10g-x1.json"


def test_a_candidate_is_written_as_bless_would_write_it(tmp_path: Path) -> None:
    candidate = golden()
    path = write_candidate(candidate, tmp_path / "out")
    assert path == path_of(tmp_path / "out", candidate["machine_class"])
    assert document.read(path) == candidate
    assert path.read_text() == document.dumps(candidate)


def test_a_document_that_cannot_be_written_is_a_warning_not_an_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    invalid = {**golden(), "format": 99}
    assert write_candidate(invalid, tmp_path) is None
    assert not path_of(tmp_path, invalid["machine_class"]).exists()
    assert "the candidate golden file was not written" in capsys.readouterr().err


def test_a_stale_candidate_is_removed_and_a_missing_one_is_no_error(tmp_path: Path) -> None:
    path = write_candidate(golden(), tmp_path)
    assert path is not None and path.is_file()
    remove_stale(tmp_path, golden()["machine_class"])
    assert not path.exists()
    remove_stale(tmp_path, "cpu-never-written")
