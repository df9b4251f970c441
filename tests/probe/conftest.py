"""Fixtures for the probe's tests that import its modules in the test process."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from types import ModuleType

import pytest

from repro_gate.probe import INJECT_DIR


@pytest.fixture
def probe_module(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], ModuleType]]:
    """Import the probe's modules in this process (as the training would), forgotten after."""
    monkeypatch.syspath_prepend(str(INJECT_DIR))
    before = set(sys.modules)
    yield importlib.import_module
    for name in set(sys.modules) - before:
        if name.startswith("_repro_gate_"):
            del sys.modules[name]
