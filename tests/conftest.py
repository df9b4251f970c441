"""Fixtures shared by the whole suite; those of one kind of service live in tests/helpers.

Markers are set here from what a test uses, so they tell the truth: `acceptance` by path,
`docker`, `rootless` and `prometheus` by fixture, `slow` for the scenarios of several gates
(and by the few modules and tests that mark themselves).
Under pytest-xdist (`--dist loadgroup`, as scripts/test runs) each module is one group, so a
module's shared gate runs once, and every test of a container engine is in one group: the engines,
images and system users that their session fixtures set up are never raced by two workers.
"""

from __future__ import annotations

import os
import shutil
import time
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


ACCEPTANCE = Path(__file__).parent / "acceptance"
ENGINE_GROUP = "container-engines"
# Modules whose tests are scenarios of several gates (a golden file blessed then changed, two
# environments compared, one clone gated in turn): `slow`, left out of the pull-request tier.
MULTI_GATE_SCENARIOS = {
    "tests/acceptance/cli/test_check_vary.py",
    "tests/acceptance/cli/test_golden.py",
    "tests/acceptance/cli/test_golden_rebuild.py",
    "tests/acceptance/cli/test_upgrade_command.py",
    "tests/acceptance/cli/test_upgrade_sources.py",
    "tests/acceptance/cli/test_work_copy.py",
    "tests/acceptance/github/test_action_upgrade.py",
}
# A marker and the fixtures whose use sets it; a fixture here pulls in every one it depends on.
MARKER_FIXTURES = {
    "docker": {"docker_client"},
    "rootless": {"rootless_host"},
    "prometheus": {"prometheus", "pushgateway"},
}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if ACCEPTANCE in item.path.parents:
            item.add_marker(pytest.mark.acceptance)
        if item.nodeid.split("::")[0] in MULTI_GATE_SCENARIOS:
            item.add_marker(pytest.mark.slow)
        used = set(getattr(item, "fixturenames", ()))
        for marker, fixtures in MARKER_FIXTURES.items():
            if used & fixtures:
                item.add_marker(marker)
        group = ENGINE_GROUP if _uses_an_engine(item) else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
    # Longest first (scripts/test keeps this order): the engines' group, then the other
    # acceptance modules, then the unit tests, so that no long module starts last.
    items.sort(key=lambda item: (not _uses_an_engine(item), ACCEPTANCE not in item.path.parents))


def _uses_an_engine(item: pytest.Item) -> bool:
    return bool(item.get_closest_marker("docker") or item.get_closest_marker("rootless"))


@pytest.hookimpl(trylast=True)  # after the twenty slowest tests
def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The whole run's wall time, set-up included, when scripts/test started the clock."""
    started = os.environ.get("REPRO_GATE_TEST_STARTED")
    if started:
        seconds = time.time() - float(started)
        terminalreporter.write_line(
            f"scripts/test: {seconds / 60:.1f} min in all (install, ruff, mypy, pytest)"
        )
