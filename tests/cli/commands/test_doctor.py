"""`repro-gate doctor`: the static checklist of a real project directory, its exit code, its
lines and its JSON, with no training and no torch import."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro_gate.cli.commands.doctor import describe, doctor
from repro_gate.cli.main import main
from repro_gate.errors import EXIT_ERROR, EXIT_FAIL


def items_by_id(checklist: dict[str, object]) -> dict[str, dict[str, str]]:
    return {item["id"]: item for item in checklist["items"]}


def test_a_project_without_a_lockfile_fails_the_lockfile_item(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.py").write_text("print('train')\n")

    assert doctor(None, as_json=True) == EXIT_FAIL

    document = json.loads(capsys.readouterr().out)
    assert document["config_file"] is None
    items = items_by_id(document["checklist"])
    assert items["lockfile"]["status"] == "fail"
    assert items["clean_tree"]["detail"] == "code is not identified: not a git repository"
    counts = document["checklist"]["counts"]
    assert counts["fail"] == sum(i["status"] == "fail" for i in items.values())


def test_configured_data_is_hashed_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data.bin").write_bytes(b"0123456789")
    (tmp_path / ".repro-gate.yml").write_text("command: python train.py\ndata: [data.bin]\n")

    doctor(None, as_json=True)
    unhashed = json.loads(capsys.readouterr().out)
    doctor(None, hash_data_files=True, as_json=True)
    hashed = json.loads(capsys.readouterr().out)

    assert unhashed["config_file"] == str(tmp_path / ".repro-gate.yml")
    assert items_by_id(unhashed["checklist"])["data"]["detail"] == (
        "1 data paths exist; hashed during `repro-gate check` (or `doctor --hash-data`)")
    assert items_by_id(hashed["checklist"])["data"]["detail"] == (
        "1 files, 10 bytes, sha256 recorded")


def test_the_report_has_a_summary_then_one_line_per_item(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)

    doctor(None)

    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("repro-gate doctor: ")
    assert any(line.startswith("FAIL     env      lockfile present and hash-pinned: ")
               for line in lines)


def test_describe_shows_the_fix_of_what_does_not_pass() -> None:
    checklist = {
        "counts": {"pass": 1, "warn": 1, "fail": 0, "deferred": 0},
        "items": [
            {"status": "pass", "category": "code", "title": "clean", "detail": "ok",
             "fix": "never shown"},
            {"status": "warn", "category": "data", "title": "data", "detail": "none",
             "fix": "list them"},
        ],
    }

    assert describe(checklist) == [
        "repro-gate doctor: 1 pass, 1 warn, 0 fail, 0 checked during a run",
        "PASS     code     clean: ok",
        "WARN     data     data: none",
        f"{'':<17} fix: list them",
    ]


def test_a_missing_config_file_is_one_error_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)

    assert main(["doctor", "--config", str(tmp_path / "absent.yml")]) == EXIT_ERROR

    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("repro-gate: error: ") and captured.err.count("\n") == 1
