"""Fixtures shared by the whole suite; those of one kind of service live in tests/helpers."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers.manifest_docs import load_current
from helpers.paths import TRAININGS

pytest_plugins = [
    "helpers.docker_fixtures",
    "helpers.github_fixtures",
    "helpers.upgrade_fixtures",
    "helpers.rootless_slots",
]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A working directory holding the tiny training scripts."""
    for script in TRAININGS.glob("*.py"):
        shutil.copy(script, tmp_path / script.name)
    return tmp_path


@pytest.fixture
def manifest_current() -> dict[str, Any]:
    """A failing run's manifest, valid against the current schema."""
    return load_current()
