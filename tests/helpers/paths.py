"""Where the test suite's data lives: one place, so a test file can move without its paths."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
ROOT = TESTS.parent  # the repository
FIXTURES = TESTS / "fixtures"
TRAININGS = TESTS / "trainings"  # tiny real trainings the gate runs
SCRIPTS = TESTS / "scripts"  # small scripts run under the probe
MANIFEST_FAIL = FIXTURES / "github" / "manifest-fail.json"  # a failing gate's manifest
