"""The repository the gate runs for, and file paths relative to it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from repro_gate.workspace import repository_path, workspace_root


def test_the_workspace_is_github_workspace_in_actions_else_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)

    assert workspace_root({"GITHUB_WORKSPACE": "/home/runner/work/r/r"}) == Path(
        "/home/runner/work/r/r")
    assert workspace_root({"GITHUB_WORKSPACE": ""}) == Path(os.getcwd())
    assert workspace_root({}) == tmp_path


def test_files_inside_the_workspace_are_named_relative_to_it() -> None:
    root = "/srv/repo"

    assert repository_path("train.py", root) == "train.py"
    assert repository_path("/srv/repo/src/model.py", root) == "src/model.py"
    assert repository_path("src/../lib/./data.py", root) == "lib/data.py"
    assert repository_path("/srv/repo/", Path("/srv/repo/sub/..")) is None  # the root itself


@pytest.mark.parametrize(
    "file",
    ["/usr/lib/python3/site-packages/torch/nn.py", "../other/train.py", "/srv/repository/x.py"],
)
def test_files_outside_the_workspace_have_no_repository_path(file: str) -> None:
    assert repository_path(file, "/srv/repo") is None


def test_a_missing_file_or_workspace_gives_no_path() -> None:
    assert repository_path(None, "/srv/repo") is None
    assert repository_path("", "/srv/repo") is None
    assert repository_path(12, "/srv/repo") is None
    assert repository_path("train.py", None) is None
