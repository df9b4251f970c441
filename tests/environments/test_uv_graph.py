"""A uv.lock's edges: the direct packages, and those installed on an interpreter whose markers
are given (a Linux CPython 3.11 here; the lock's Windows and old-Python packages fall away)."""

from __future__ import annotations

from typing import Any

from repro_gate.environments.uv_graph import holds, read_graph

LINUX = {"sys_platform": "linux", "platform_system": "Linux", "python_version": "3.11",
         "python_full_version": "3.11.7", "platform_machine": "x86_64"}


def package(name: str, version: str, *, registry: bool = True, **extra: Any) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "version": version, **extra}
    if registry:
        entry.setdefault("source", {"registry": "https://pypi.org/simple"})
    return entry


LOCK = {"package": [
    package("trainer", "0.1.0", registry=False, source={"editable": "."},
            dependencies=[{"name": "torch"}, {"name": "numpy", "version": "2.0.1",
                                              "marker": "python_full_version >= '3.10'"},
                          {"name": "numpy", "version": "1.24.4",
                           "marker": "python_full_version < '3.10'"},
                          {"name": "pywin32", "marker": "sys_platform == 'win32'"},
                          {"name": "tools", "marker": "sys_platform == 'linux'"}],
            **{"optional-dependencies": {"http": [{"name": "requests", "extra": ["socks"]}]},
               "dev-dependencies": {"dev": [{"name": "pytest"}]}}),
    package("torch", "2.4.0", dependencies=[{"name": "filelock"}]),
    package("filelock", "3.15.4"),
    package("numpy", "2.0.1"),
    package("numpy", "1.24.4"),
    package("pywin32", "306"),
    package("requests", "2.32.3", dependencies=[{"name": "urllib3"}],
            **{"optional-dependencies": {"socks": [{"name": "pysocks"}]}}),
    package("urllib3", "2.2.2"),
    package("pysocks", "1.7.1"),
    package("pytest", "8.3.2"),
    package("tools", "0.1.0", registry=False, source={"directory": "tools"}),
    package("unused", "1.0"),
]}


def test_a_marker_that_cannot_be_evaluated_counts_as_holding() -> None:
    assert holds(None, LINUX) and holds("", LINUX)
    assert holds("sys_platform == 'linux'", LINUX)
    assert not holds("sys_platform == 'win32'", LINUX)
    assert holds("this is not a marker", LINUX)


def test_the_walk_keeps_what_installs_here_at_the_version_picked_here() -> None:
    graph = read_graph(LOCK, LINUX)

    assert graph.walked is True
    assert graph.applies == {"filelock": "3.15.4", "numpy": "2.0.1", "pysocks": "1.7.1",
                             "pytest": "8.3.2", "requests": "2.32.3", "torch": "2.4.0",
                             "urllib3": "2.2.2"}
    assert "pywin32" not in graph.applies and "unused" not in graph.applies


def test_direct_packages_include_every_extra_and_group_but_not_local_ones() -> None:
    graph = read_graph(LOCK, LINUX)

    assert graph.direct == {"torch", "numpy", "pywin32", "requests", "pytest"}
    assert graph.local == ("tools", "trainer")


def test_an_old_python_picks_the_other_version() -> None:
    old = {**LINUX, "python_version": "3.9", "python_full_version": "3.9.18"}

    assert read_graph(LOCK, old).applies["numpy"] == "1.24.4"


def test_a_lock_without_a_project_applies_every_package_it_holds() -> None:
    document = {"package": [package("numpy", "2.0.1"), package("pywin32", "306"),
                            package("tools", "0.1.0", registry=False,
                                    source={"path": "tools"})]}

    graph = read_graph(document, LINUX)

    assert graph.walked is False
    assert graph.applies == {"numpy": "2.0.1", "pywin32": "306"}
    assert graph.direct == {"numpy", "pywin32"}
    assert graph.local == ("tools",)
