"""Fixtures: the fake GitHub API and a realistic manifest."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from helpers.fake_github import FakeGitHub
from helpers.paths import FIXTURES

DATA = FIXTURES / "github"


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    """The fake API on a free loopback port; any invalid request fails the test."""
    server = FakeGitHub().start()
    yield server
    server.stop()
    assert server.violations == [], "requests GitHub would reject"


@pytest.fixture
def manifest() -> dict[str, Any]:
    """A failing run's manifest, valid against schemas/manifest.schema.json."""
    return copy.deepcopy(json.loads((DATA / "manifest-fail.json").read_text(encoding="utf-8")))
