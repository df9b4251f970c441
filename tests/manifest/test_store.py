"""Writing manifests: validated first, replaced atomically, nothing left behind."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from helpers.manifest_docs import write_json

from repro_gate import manifest
from repro_gate.errors import GateError


def test_update_replaces_a_manifest_with_a_valid_one(
    tmp_path: Path, manifest_current: dict[str, Any]
) -> None:
    path = write_json(tmp_path / "manifest.json", manifest_current)
    manifest_current["gate"] = "renamed"
    manifest.update(path, manifest_current)
    assert manifest.read(path)["gate"] == "renamed"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]


def test_update_keeps_the_old_file_when_validation_fails(
    tmp_path: Path, manifest_current: dict[str, Any]
) -> None:
    path = write_json(tmp_path / "manifest.json", manifest_current)
    before = path.read_bytes()
    manifest_current["verdict"] = "maybe"
    with pytest.raises(GateError) as raised:
        manifest.update(path, manifest_current)
    assert raised.value.kind == "manifest_invalid"
    assert "verdict" in raised.value.message
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]


def test_write_puts_manifest_json_in_the_output_directory(
    tmp_path: Path, manifest_current: dict[str, Any]
) -> None:
    output = tmp_path / "out"
    path = manifest.write(manifest_current, output)
    assert path == output / manifest.MANIFEST_NAME
    assert manifest.read(path) == manifest_current
    assert [p.name for p in output.iterdir()] == ["manifest.json"]


def test_atomic_write_leaves_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    manifest.write_json_atomic(path, {"ratio": float("nan"), "values": (1, 2)})
    assert json.loads(path.read_text(encoding="utf-8")) == {"ratio": None, "values": [1, 2]}
    assert [p.name for p in tmp_path.iterdir()] == ["data.json"]


def test_a_failed_atomic_write_keeps_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = write_json(tmp_path / "data.json", {"kept": True})
    with pytest.raises(TypeError):
        manifest.write_json_atomic(path, {"not json": object()})
    assert json.loads(path.read_text(encoding="utf-8")) == {"kept": True}
    assert [p.name for p in tmp_path.iterdir()] == ["data.json"]


def test_an_atomic_write_gives_the_file_the_mode_open_would(tmp_path: Path) -> None:
    # In the action's container the gate is root: a 0600 manifest could not be uploaded by the
    # runner's user.
    previous = os.umask(0o022)
    try:
        manifest.write_json_atomic(tmp_path / "data.json", {"a": 1})
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "data.json").stat().st_mode) == 0o644
