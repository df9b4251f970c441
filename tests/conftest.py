"""Fixtures shared by the whole suite."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from gate_cli import TRAININGS


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A working directory holding the tiny training scripts."""
    for script in TRAININGS.glob("*.py"):
        shutil.copy(script, tmp_path / script.name)
    return tmp_path
