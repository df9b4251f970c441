"""Fixtures of the upgrade check's tests: the local package index and locked projects
(upgrade_index.py says what they hold)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from helpers.upgrade_index import (
    BASELINE_VERSION,
    PACKAGES,
    PackageIndex,
    Templates,
    build_wheel,
    lock_templates,
)


@pytest.fixture(scope="session")
def uv_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """uv offline, with a cache of its own, for the whole session."""
    cache = tmp_path_factory.mktemp("uv-cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("UV_OFFLINE", "1")
        patch.setenv("UV_PYTHON_DOWNLOADS", "never")
        patch.setenv("UV_CACHE_DIR", str(cache))
        patch.delenv("VIRTUAL_ENV", raising=False)
        yield


@pytest.fixture(scope="session")
def index_and_templates(uv_session: None, tmp_path_factory: pytest.TempPathFactory,
                        ) -> tuple[PackageIndex, Templates]:
    root = tmp_path_factory.mktemp("upgrade-index")
    index = PackageIndex(root / "index")
    later = root / "published-later"
    for name, versions in PACKAGES.items():
        for version in versions:
            target = index.path if version == BASELINE_VERSION else later
            build_wheel(name, version, root / "sources", target)
    templates = Templates(root / "templates")
    templates.root.mkdir()
    lock_templates(templates.root, index)
    for wheel in later.iterdir():  # the upgrades are published
        shutil.copy(wheel, index.path / wheel.name)
    return index, templates


@pytest.fixture(scope="session")
def package_index(index_and_templates: tuple[PackageIndex, Templates]) -> PackageIndex:
    return index_and_templates[0]


@pytest.fixture(scope="session")
def templates(index_and_templates: tuple[PackageIndex, Templates]) -> Templates:
    return index_and_templates[1]


@pytest.fixture
def make_project(templates: Templates, tmp_path: Path) -> Callable[[str], Path]:
    """`make_project("uv-project")`: a fresh copy of a locked project in this test's tmp_path."""
    return lambda name: templates.copy(name, tmp_path)


@pytest.fixture
def env_cache(tmp_path: Path) -> Path:
    return tmp_path / "envs"
