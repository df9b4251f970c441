"""A lockfile read into a typed `Lock`: every locked package, its version, whether it is direct.

Two formats: `uv.lock`, and a pinned requirements file (`name==version` lines, `--hash` options
allowed: `uv pip compile` / pip-compile output). The pins come from the fingerprint's parsers
(`fingerprint.lockfiles`), so the upgrade check and the fingerprint read a lock the same way.

Direct or transitive:
- uv.lock: what the project's own package (`source = { editable|virtual = "." }`) depends on;
- requirements: the `# via` annotations of `uv pip compile` / pip-compile output; without them,
  the names in the source next to the file (`requirements.in`, else `pyproject.toml`); without
  one, every pin is direct.

A lock can hold a package only some platforms install (`pywin32`, `; sys_platform == "win32"`):
`LockedPackage.applies` says whether this interpreter installs it, and `Lock.pins()` is what an
environment built here contains.
"""

from __future__ import annotations

import hashlib
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from packaging.markers import default_environment
from packaging.version import InvalidVersion, Version

from repro_gate import parsing
from repro_gate.environments.package_sources import PackageSources, uv_lock_sources
from repro_gate.environments.requirements_sources import requirements_sources
from repro_gate.environments.uv_graph import holds, read_graph
from repro_gate.errors import ErrorKind, GateError, one_line
from repro_gate.fingerprint import lockfiles

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

LockFormat = Literal["uv.lock", "requirements"]
FORMATS: tuple[LockFormat, ...] = ("uv.lock", "requirements")
# Looked for in the workdir, in this order, when `upgrade.lock` is not set.
DEFAULT_LOCKS = ("uv.lock", "requirements.txt")
# A `# via` source ending so is the project's own metadata, not another package.
_DECLARING_FILES = ("(pyproject.toml)", "(setup.py)", "(setup.cfg)")


@dataclass(frozen=True)
class LockedPackage:
    """One package of a lock."""

    name: str  # PEP 503 normalized
    version: str
    direct: bool  # the project asks for it itself (not only another package)
    applies: bool = True  # installed on this interpreter (its environment markers hold here)


@dataclass(frozen=True)
class Lock:
    """A lockfile as the upgrade check sees it."""

    path: Path
    format: LockFormat
    sha256: str  # of the file's bytes
    packages: dict[str, LockedPackage]  # by name, sorted
    hash_pinned: bool = False  # every pin carries an artifact hash
    local: tuple[str, ...] = ()  # the project and other packages built from the checkout
    sources: PackageSources = field(default_factory=PackageSources)  # where each comes from

    def pins(self) -> dict[str, str]:
        """name -> version of the packages an environment built here contains."""
        return {name: p.version for name, p in self.packages.items() if p.applies}


def find_lock(workdir: Path, configured: str | None = None) -> Path:
    """The baseline lockfile: `upgrade.lock` (relative to the workdir), else the first of
    DEFAULT_LOCKS there; a LOCKFILE GateError when there is none."""
    if configured:
        return workdir / configured
    for name in DEFAULT_LOCKS:
        if (workdir / name).is_file():
            return workdir / name
    raise GateError(f"no lockfile in {workdir}: looked for {' and '.join(DEFAULT_LOCKS)}"
                    " (set upgrade.lock)", kind=ErrorKind.LOCKFILE)


def read_lock(path: Path, *, role: str = "lockfile", fmt: LockFormat | None = None,
              project: Path | None = None) -> Lock:
    """Read `path` into a Lock; `fmt` is the format when the file name does not tell it;
    `project` is the directory the lock's relative paths start from (default: the lock's).

    Every problem is a LOCKFILE GateError of one line that starts with `role` and the path
    (a source the check cannot honour: the path and the line).
    """
    where = f"{role} {path}"
    text = _read_text(path, where)
    fmt = _format(path, text, fmt, where)
    sha256 = hashlib.sha256(text.encode("utf-8")).hexdigest()  # UTF-8 round-trips: the bytes
    try:
        if fmt == "uv.lock":
            return _uv_lock(path, text, sha256, where, project or path.parent)
        return _requirements(path, text, sha256, where, project or path.parent)
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise _lock_error(f"{where}: cannot parse: {one_line(error)}") from None


def requirements_source(path: Path) -> Path | None:
    """What a requirements lock is compiled from: `X.in` next to `X.txt`, else the
    `pyproject.toml` next to it; None when neither exists."""
    for source in (path.with_suffix(".in"), path.parent / "pyproject.toml"):
        if source.is_file():
            return source
    return None


def _read_text(path: Path, where: str) -> str:
    try:
        return parsing.read_text(path)
    except FileNotFoundError:
        raise _lock_error(f"{where} not found") from None
    except IsADirectoryError:
        raise _lock_error(f"{where} is a directory, not a lockfile") from None
    except (OSError, UnicodeDecodeError, parsing.OverBudget) as error:
        raise _lock_error(f"cannot read {where}: {one_line(error)}") from None


def _format(path: Path, text: str, fmt: LockFormat | None, where: str) -> LockFormat:
    """The format the file name says; else `fmt`; else what the content looks like."""
    try:
        named = lockfiles.format_of(path)
    except ValueError:
        named = None
    if named in FORMATS:
        return named
    if named is not None:
        raise _lock_error(f"{where}: {named} is not supported; upgrade reads a uv.lock or a"
                          " pinned requirements file")
    if fmt is not None:
        return fmt
    try:
        if "package" in tomllib.loads(text):
            return "uv.lock"
    except tomllib.TOMLDecodeError:
        pass
    if lockfiles.parse_requirements(text)["pins"]:
        return "requirements"
    raise _lock_error(f"{where}: neither a uv.lock nor a pinned requirements file")


def _uv_lock(path: Path, text: str, sha256: str, where: str, project: Path) -> Lock:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise _lock_error(f"{where}: not valid TOML: {one_line(error)}") from None
    if not isinstance(document.get("package"), list):
        raise _lock_error(f"{where}: not a uv.lock (no [[package]] tables)")
    parsed = lockfiles.parse_uv_lock(text)
    graph = read_graph(document, _marker_environment())
    packages = {}
    for name, versions in parsed["pins"].items():
        if name in graph.local:
            continue
        applies = name in graph.applies
        version = graph.applies[name] if applies else _highest(versions)
        packages[name] = LockedPackage(name, version, name in graph.direct, applies)
    return Lock(path, "uv.lock", sha256, packages, parsed["hash_pinned"], graph.local,
                uv_lock_sources(path, document, project))


def _requirements(path: Path, text: str, sha256: str, where: str, project: Path) -> Lock:
    parsed = lockfiles.parse_requirements(text)
    sources = requirements_sources(path, text, project)
    for (name, version), origin in sources.pinned.items():
        if " @ " in origin.requirement:  # a direct reference pins what it names
            parsed["pins"].setdefault(name, []).append(version)
            parsed["unpinned"] = [other for other in parsed["unpinned"] if other != name]
    if parsed["unpinned"]:
        raise _lock_error(f"{where}: not a lock: {', '.join(parsed['unpinned'])} not pinned"
                          " with ==")
    if not parsed["pins"]:
        raise _lock_error(f"{where}: pins no package (name==version lines)")
    markers = lockfiles.requirement_markers(text)
    direct = _requirements_direct(path, text, set(parsed["pins"]))
    environment = _marker_environment()
    packages = {}
    for name, versions in parsed["pins"].items():
        here = [v for v in versions if holds(markers.get((name, v)), environment)]
        version = _highest(here or versions)
        packages[name] = LockedPackage(name, version, name in direct, applies=bool(here))
    return Lock(path, "requirements", sha256, packages, parsed["hash_pinned"], (), sources)


def _requirements_direct(path: Path, text: str, names: set[str]) -> set[str]:
    """The pins the user asked for (module docstring: annotations, then the source)."""
    via = lockfiles.requirements_via(text)
    if via:  # a pin without an annotation in an annotated file: nothing else asked for it
        return {name for name in names
                if name not in via or any(_is_direct(source) for source in via[name])}
    source = requirements_source(path)
    declared = _declared(source) if source is not None else set()
    return names & declared if declared else names


def _is_direct(source: str) -> bool:
    """`-r requirements.in` or `trainer (pyproject.toml)`: the user's own list asked for it."""
    return source.startswith("-r") or source.endswith(_DECLARING_FILES)


def _declared(source: Path) -> set[str]:
    """Names a requirements.in or a pyproject.toml asks for (extras and groups included)."""
    if source.suffix == ".toml":
        project = _toml(source)
        groups = [*project.get("project", {}).get("optional-dependencies", {}).values(),
                  *project.get("dependency-groups", {}).values()]
        return _names([*project.get("project", {}).get("dependencies", []),
                       *(line for group in groups for line in group)])
    try:
        parsed = lockfiles.parse_requirements(parsing.read_text(source))
    except (OSError, UnicodeDecodeError, parsing.OverBudget):
        return set()  # an unreadable source tells nothing: every pin is then direct
    return set(parsed["pins"]) | set(parsed["unpinned"])


def optional_names(pyproject: Path) -> set[str]:
    """Names only the extras (`[project.optional-dependencies]`) of a pyproject.toml ask for."""
    optional = _toml(pyproject).get("project", {}).get("optional-dependencies", {})
    return _names([line for lines in optional.values() for line in lines])


def _toml(path: Path) -> dict[str, Any]:
    """A TOML file's document; {} when it cannot be read (it then tells nothing)."""
    try:
        return tomllib.loads(parsing.read_text(path))
    except (OSError, UnicodeDecodeError, parsing.OverBudget, tomllib.TOMLDecodeError):
        return {}


def _names(lines: list[Any]) -> set[str]:
    """The project names of requirement strings (`{include-group = ...}` tables skipped)."""
    parsed = lockfiles.parse_requirements("\n".join(line for line in lines
                                                    if isinstance(line, str)))
    return set(parsed["pins"]) | set(parsed["unpinned"])


def _marker_environment() -> dict[str, str]:
    """The marker values of the running interpreter (the one environments are built from)."""
    return {**{key: str(value) for key, value in default_environment().items()}, "extra": ""}


def _highest(versions: list[str]) -> str:
    """The highest of a package's versions by PEP 440 (the parsers sort them as strings)."""
    def key(version: str) -> tuple[int, Version | str]:
        try:
            return (1, Version(version))
        except InvalidVersion:
            return (0, version)
    return max(versions, key=key)


def _lock_error(message: str) -> GateError:
    return GateError(message, kind=ErrorKind.LOCKFILE)
