"""`repro-gate diff OLD NEW` on real manifests and fingerprint documents: the exit code, the
lines by category, and bad input as one error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.manifest_docs import load_current

from repro_gate.cli.commands.diff import describe, diff
from repro_gate.cli.main import main
from repro_gate.errors import EXIT_ERROR, EXIT_FAIL, EXIT_PASS, ErrorKind, GateError


def write(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(json.dumps(document))
    return path


def test_the_same_manifest_twice_is_equal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = write(tmp_path / "old.json", load_current())

    assert diff(manifest, manifest) == EXIT_PASS

    line = capsys.readouterr().out
    assert line.startswith("environments are equal (config_hash ")
    assert line.count("\n") == 1


def test_a_changed_torch_and_seed_are_listed_by_category(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = load_current()
    new = load_current()
    new["fingerprint"]["env"]["torch"] = "2.6.0+cu124"
    new["fingerprint"]["random"]["seed"] = 99

    assert diff(write(tmp_path / "old.json", old), write(tmp_path / "new.json", new)) == EXIT_FAIL

    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("2 changes (config_hash ")
    assert lines.index("env:") < lines.index("random:")
    assert any("torch" in line and "2.6.0+cu124" in line for line in lines)


def test_the_json_diff_carries_the_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = load_current()
    new["fingerprint"]["hardware"]["cpu"]["count"] = 1024
    old_path, new_path = write(tmp_path / "o.json", load_current()), write(tmp_path / "n.json", new)

    assert diff(old_path, new_path, as_json=True) == EXIT_FAIL

    result = json.loads(capsys.readouterr().out)
    assert result["equal"] is False
    assert [c["category"] for c in result["changes"]] == ["hardware"]
    assert result["old_config_hash"] != result["new_config_hash"]


def test_a_broken_fingerprint_document_is_bad_input(tmp_path: Path) -> None:
    broken = write(tmp_path / "fp.json", {"fingerprint": {"code": "not an object"}})

    with pytest.raises(GateError) as raised:
        diff(broken, broken)

    assert raised.value.kind is ErrorKind.INPUT
    assert raised.value.message.startswith(f"{broken}: not a valid fingerprint: ")


def test_a_file_that_is_not_json_fails_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.txt").write_text("hello")

    assert main(["diff", str(tmp_path / "notes.txt"), str(tmp_path / "notes.txt")]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith("repro-gate: error: ") and err.count("\n") == 1


def test_describe_lists_categories_in_their_order() -> None:
    result = {"equal": False, "old_config_hash": "a" * 64, "new_config_hash": "b" * 64,
              "changes": [{"category": "hardware", "message": "CPU x -> y"},
                          {"category": "code", "message": "commit 1 -> 2"}]}

    assert describe(result) == [
        f"2 changes (config_hash {'a' * 12} -> {'b' * 12})",
        "code:", "  commit 1 -> 2", "hardware:", "  CPU x -> y"]
