"""Fixtures for the manifest tests."""

from __future__ import annotations

from typing import Any

import pytest
from manifest_docs import load_v2


@pytest.fixture
def manifest_v2() -> dict[str, Any]:
    """A failing run's manifest, valid against the current schema (version 2)."""
    return load_v2()
