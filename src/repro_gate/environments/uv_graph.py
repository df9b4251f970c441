"""A uv.lock's dependency graph: which packages are direct, and which apply on this interpreter.

A uv.lock is universal: it holds every package any platform needs (`pywin32` for Windows, CUDA
wheels for Linux), and the edges carry the environment markers. Walking the edges from the
project itself (the package whose source is `{ editable = "." }` or `{ virtual = "." }`, and the
other workspace members), keeping only the edges whose markers hold here, gives the packages an
install on this interpreter contains, at the version it would pick when the lock holds several.

The project's extras and dependency groups are all followed: a training environment usually has
them, and one package too many is cheaper than a training that cannot import one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName

from repro_gate.fingerprint.lockfiles import canonical_name

# Sources that are the user's own code, built from the checkout: never pinned or installed.
LOCAL_SOURCES = ("editable", "virtual", "directory", "path")
PROJECT_SOURCES = ("editable", "virtual")  # the project and its workspace members

Package = dict[str, Any]  # one `[[package]]` table of the lock, as parsed


@dataclass(frozen=True)
class UvGraph:
    """What the edges of a uv.lock say."""

    direct: frozenset[str]  # what the project itself depends on (any marker, extra or group)
    applies: dict[str, str]  # name -> version, for the packages installed on this interpreter
    local: tuple[str, ...]  # the project and other packages built from the checkout
    walked: bool  # False: the lock names no project to walk from; every package applies


def read_graph(document: Mapping[str, Any], environment: Mapping[str, str]) -> UvGraph:
    """The graph of a parsed uv.lock, markers evaluated in `environment`."""
    packages: list[Package] = list(document.get("package", []))
    local = tuple(sorted({canonical_name(p["name"]) for p in packages
                          if _source_in(p, LOCAL_SOURCES)}))
    projects = [p for p in packages if _source_in(p, PROJECT_SOURCES)]
    if not projects:
        applies = {canonical_name(p["name"]): str(p["version"]) for p in packages
                   if "version" in p and not _source_in(p, LOCAL_SOURCES)}
        return UvGraph(frozenset(applies), applies, local, walked=False)
    by_name: dict[str, list[Package]] = {}
    for package in packages:
        by_name.setdefault(canonical_name(package["name"]), []).append(package)
    direct = {canonical_name(edge["name"]) for project in projects
              for edge in _edges(project, everything=True)}
    applies = _walk(projects, by_name, {**environment, "extra": ""})
    return UvGraph(frozenset(direct - set(local)), applies, local, walked=True)


def _walk(projects: list[Package], by_name: dict[str, list[Package]],
          environment: dict[str, str]) -> dict[str, str]:
    """Breadth-first from the projects along the edges whose markers hold."""
    applies: dict[str, str] = {}
    queue: list[tuple[Package, tuple[str, ...], bool]] = [(p, (), True) for p in projects]
    seen: set[tuple[str, str, tuple[str, ...]]] = set()
    while queue:
        package, extras, is_project = queue.pop(0)
        key = (canonical_name(package["name"]), str(package.get("version", "")), extras)
        if key in seen:
            continue
        seen.add(key)
        for edge in _edges(package, everything=is_project, extras=extras):
            if not holds(edge.get("marker"), environment):
                continue
            target = _target(by_name, edge)
            if target is None:
                continue
            if not _source_in(target, LOCAL_SOURCES) and "version" in target:
                applies[canonical_name(target["name"])] = str(target["version"])
            queue.append((target, tuple(sorted(edge.get("extra", []))), False))
    return dict(sorted(applies.items()))


def _edges(package: Package, everything: bool, extras: tuple[str, ...] = ()) -> list[Package]:
    """A package's dependency edges: its own, plus the named extras' (every extra and
    dependency group for a project)."""
    edges = list(package.get("dependencies", []))
    optional = package.get("optional-dependencies", {})
    for extra, extra_edges in optional.items():
        if everything or extra in extras:
            edges += extra_edges
    if everything:
        for group_edges in package.get("dev-dependencies", {}).values():
            edges += group_edges
    return edges


def _target(by_name: dict[str, list[Package]], edge: Package) -> Package | None:
    """The package an edge points to; `version` and `source` tell apart those of one name."""
    candidates = by_name.get(canonical_name(edge["name"]), [])
    for key in ("version", "source"):
        if key in edge and len(candidates) > 1:
            candidates = [c for c in candidates if c.get(key) == edge[key]] or candidates
    return candidates[0] if candidates else None


def holds(marker: str | None, environment: dict[str, str]) -> bool:
    """Whether an edge's marker holds here; one we cannot evaluate counts as holding (an extra
    package installed is harmless, a missing one breaks the training)."""
    if not marker:
        return True
    try:
        return Marker(marker).evaluate(environment)
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
        return True


def _source_in(package: Package, kinds: tuple[str, ...]) -> bool:
    return any(kind in (package.get("source") or {}) for kind in kinds)
