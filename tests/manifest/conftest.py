"""Fixtures for the manifest tests."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.manifest_docs import load_current


@pytest.fixture
def manifest_current() -> dict[str, Any]:
    """A failing run's manifest, valid against the current schema (version 4)."""
    return load_current()
