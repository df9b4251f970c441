"""Where each locked package is installed from: the lock's own sources and the project's
configuration, never the pins alone.

- uv.lock: every package records its source. `registry = URL` (an index) and `registry = PATH`
  (a find-links folder, or a local index the project's `[[tool.uv.index]]` names) install the
  package from that index alone; `url` as a direct reference; `git` at the commit the lock
  records; `path` and `directory` from the file or folder; `editable` installs in place when it
  lies inside the project (the project itself runs from the checkout and is not installed);
  `virtual` is never installed. An index's credentials come from the project's
  `[[tool.uv.index]]` URL or uv's `UV_INDEX_<NAME>_USERNAME` / `_PASSWORD` (uv.lock keeps none).
- A requirements file: its own `--index-url`, `--extra-index-url`, `--find-links`,
  `--trusted-host`, `--no-index`, `--pre`, `--prefer-binary`, `--only-binary`, `--no-binary`
  lines apply to its pins as pip would apply them (uv reads them from the file it installs);
  `--hash` options are enforced (`--require-hashes` as soon as one pin has one); `name @ URL`
  and `-e` lines are installed as they say (requirements_sources.py reads them).

What cannot be honoured is refused in one line naming the file and line (a LOCKFILE
GateError), never dropped: an editable path outside the project, a VCS pin without a commit,
an option this reader does not know. Relative paths are relative to the project directory
(where the workspace's lock lies, also for a copy of the lock read elsewhere), written absolute.

An environment is installed in groups, one per set of index options, each with `uv pip install
--no-deps -r <group file>`: a package is looked for on its own index only. The group files that
are kept (and the cache key) have index credentials masked; the one uv reads has them and is
removed once uv is done.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit, urlunsplit

from repro_gate.credentials import mask_url_credentials
from repro_gate.errors import ErrorKind, GateError
from repro_gate.fingerprint.lockfiles import canonical_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

VCS_SCHEMES = ("git+", "hg+", "svn+", "bzr+")
COMMIT = re.compile(r"[0-9a-fA-F]{40}|[0-9a-fA-F]{64}")


@dataclass(frozen=True)
class Origin:
    """Where one package comes from, as a line of a requirements file uv installs."""

    options: tuple[str, ...]  # the index option lines of its group (`--index-url URL`)
    requirement: str  # `name==version`, `name @ URL`, `-e /abs/dir`
    hashes: tuple[str, ...] = ()  # `sha256:…`: the artifact must match one of them

    def line(self) -> str:
        return " ".join([self.requirement, *(f"--hash={digest}" for digest in self.hashes)])


@dataclass(frozen=True)
class InstallGroup:
    """One `uv pip install --no-deps -r` of the packages that share their index options."""

    options: tuple[str, ...]
    lines: tuple[str, ...]
    require_hashes: bool

    def text(self) -> str:
        return "".join(f"{line}\n" for line in (*self.options, *self.lines))

    def masked_text(self) -> str:
        """The text as it may be written down: index passwords masked."""
        return masked(self.text())


@dataclass(frozen=True)
class PackageSources:
    """The origins of a lock's packages (or of two locks', for the culprit search's mixtures)."""

    pinned: Mapping[tuple[str, str], Origin] = field(default_factory=dict)  # (name, version)
    local: tuple[Origin, ...] = ()  # the checkout's own packages, in every environment
    # pip's rule (a requirements file): one hash in a group requires one of every pin; else
    # (uv.lock) hashes are required where every pin has them, and checked where present
    hash_any: bool = False

    def with_options_of(self, other: PackageSources) -> PackageSources:
        """A requirements lock without index options of its own takes `other`'s (a candidate
        compiled from the baseline, which `uv pip compile` writes without them)."""
        if any(origin.options for origin in self.pinned.values()):
            return self
        options = next((origin.options for origin in other.pinned.values() if origin.options), ())
        return PackageSources({key: Origin(options, origin.requirement, origin.hashes)
                               for key, origin in self.pinned.items()}, self.local,
                              self.hash_any)

    def index_options(self) -> tuple[str, ...]:
        """The option lines of the pins' groups (a requirements file has one group)."""
        return tuple(dict.fromkeys(option for origin in self.pinned.values()
                                   for option in origin.options))

    def local_folders(self) -> tuple[Path, ...]:
        """The folders on this host the origins read from (find-links folders, local indexes,
        `file:` artifacts, editable folders): what a build elsewhere must see at the same path."""
        words = [word for origin in (*self.pinned.values(), *self.local)
                 for line in (*origin.options, origin.requirement) for word in line.split()]
        folders = []
        for word in words:
            path = Path(unquote(urlsplit(word).path)) if word.startswith("file:") else Path(word)
            if path.is_absolute() and path.exists():
                folders.append(path if path.is_dir() else path.parent)
        return tuple(dict.fromkeys(folders))

    def merged(self, other: PackageSources) -> PackageSources:
        """These origins, then `other`'s for the pins these do not know (the candidate's)."""
        return PackageSources({**other.pinned, **self.pinned},
                              tuple(dict.fromkeys((*self.local, *other.local))),
                              self.hash_any or other.hash_any)

    def groups(self, pins: Mapping[str, str], fallback: tuple[str, ...] = ()
               ) -> list[InstallGroup]:
        """The installs of `pins` (name -> version) and the local packages, one per set of
        index options; a pin of no known origin is `name==version` under `fallback`."""
        by_options: dict[tuple[str, ...], list[Origin]] = {}
        for name, version in pins.items():
            origin = self.pinned.get((name, version)) or Origin(fallback, f"{name}=={version}")
            by_options.setdefault(origin.options or fallback, []).append(origin)
        rule = any if self.hash_any else all
        groups = [InstallGroup(options, tuple(origin.line() for origin in origins),
                               rule(bool(origin.hashes) for origin in origins))
                  for options, origins in by_options.items()]
        if self.local:
            groups.append(InstallGroup(self.local[0].options,
                                       tuple(origin.line() for origin in self.local), False))
        return groups


def option_lines(args: tuple[str, ...]) -> tuple[str, ...]:
    """`("--no-index", "--find-links", DIR)` as requirements-file lines."""
    lines: list[str] = []
    for arg in args:
        if lines and not arg.startswith("-"):
            lines[-1] += f" {arg}"
        else:
            lines.append(arg)
    return tuple(lines)


def masked(text: str) -> str:
    """What may be written down or shown of a group file or a line: credentials masked."""
    return mask_url_credentials(text)


def uv_lock_sources(lock_path: Path, document: Mapping[str, Any], project: Path,
                    environ: Mapping[str, str] = os.environ) -> PackageSources:
    """The origins of a parsed uv.lock's packages; relative paths start at `project`."""
    config = _ProjectIndexes.read(project / "pyproject.toml", project, environ)
    pinned: dict[tuple[str, str], Origin] = {}
    local: list[Origin] = []
    for package in document.get("package", []):
        name = canonical_name(package["name"])
        source = package.get("source") or {}
        where = f"{lock_path}: package {name}"
        if "virtual" in source:
            continue
        if "editable" in source:
            directory = inside_project(project, source["editable"], where, "an editable install")
            if directory is not None:
                local.append(Origin((), f"-e {directory}"))
            continue
        if "version" not in package:
            continue
        version = str(package["version"])
        hashes = _artifact_hashes(package)
        if "registry" in source:
            origin = Origin(config.options_for(str(source["registry"])), f"{name}=={version}",
                            hashes)
        elif "url" in source:
            origin = Origin((), f"{name} @ {source['url']}", hashes)
        elif "git" in source:
            origin = Origin((), f"{name} @ {_git_reference(str(source['git']), where)}")
        elif "path" in source or "directory" in source:
            # built from the checkout, not a pin (uv_graph.LOCAL_SOURCES): in every environment
            target = (project / str(source.get("path", source.get("directory")))).resolve()
            if target != project.resolve():
                local.append(Origin((), f"{name} @ {target.as_uri()}", hashes))
            continue
        else:
            raise refused(f"{where}: source {_show(source)} is not understood")
        pinned[(name, version)] = origin
    return PackageSources(pinned, tuple(local))


def _artifact_hashes(package: Mapping[str, Any]) -> tuple[str, ...]:
    artifacts = [*package.get("wheels", []), *([package["sdist"]] if "sdist" in package else [])]
    return tuple(sorted({str(a["hash"]) for a in artifacts if isinstance(a, dict) and "hash" in a}))


def _git_reference(url: str, where: str) -> str:
    """uv.lock's `https://host/repo?rev=…&subdirectory=…#<commit>` as a pip reference at the
    commit: `git+https://host/repo@<commit>#subdirectory=…`."""
    parts = urlsplit(url)
    if not COMMIT.fullmatch(parts.fragment):
        raise refused(f"{where}: git source {masked(url)} has no commit")
    base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    subdirectory = parse_qs(parts.query).get("subdirectory")
    tail = f"#subdirectory={subdirectory[0]}" if subdirectory else ""
    return f"git+{base}@{parts.fragment}{tail}"


@dataclass(frozen=True)
class _ProjectIndexes:
    """The project's `[tool.uv]` indexes and find-links: how a lock's registry is reached."""

    project: Path
    indexes: Mapping[str, tuple[str, str]]  # URL without credentials -> (URL as configured, name)
    flat: frozenset[str]  # registries that are find-links folders or flat indexes
    environ: Mapping[str, str]

    @classmethod
    def read(cls, pyproject: Path, project: Path, environ: Mapping[str, str]) -> _ProjectIndexes:
        try:
            uv = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("tool", {}).get("uv", {})
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
            uv = {}
        indexes, flat = {}, set()
        for index in uv.get("index", []):
            url = str(index.get("url", ""))
            indexes[_plain(url)] = (url, str(index.get("name", "")))
            if index.get("format") == "flat":
                flat.add(_plain(url))
        flat.update(_plain(str(link)) for link in uv.get("find-links", []))
        return cls(project, indexes, frozenset(flat), environ)

    def options_for(self, registry: str) -> tuple[str, ...]:
        """The options that make `registry` the only place the package is looked for."""
        if "://" not in registry:
            folder = (self.project / registry).resolve()
            if registry in self.indexes and registry not in self.flat:
                return (f"--index-url {folder.as_uri()}",)
            return ("--no-index", f"--find-links {folder}")
        configured, name = self.indexes.get(_plain(registry), (registry, ""))
        url = _with_credentials(configured, name, self.environ)
        if _plain(registry) in self.flat:
            return ("--no-index", f"--find-links {url}")
        return (f"--index-url {url}",)


def _plain(url: str) -> str:
    """A URL without user info and trailing slash, to match the lock's against the project's."""
    parts = urlsplit(url)
    if not parts.netloc:
        return url.rstrip("/")
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), parts.query, ""))


def _with_credentials(url: str, name: str, environ: Mapping[str, str]) -> str:
    """`url` with uv's `UV_INDEX_<NAME>_USERNAME` / `_PASSWORD` in it, when set and the URL has
    none (uv applies them by index name, which a plain `--index-url` does not carry)."""
    parts = urlsplit(url)
    key = re.sub(r"[^A-Z0-9]", "_", name.upper())
    username = environ.get(f"UV_INDEX_{key}_USERNAME", "") if name else ""
    password = environ.get(f"UV_INDEX_{key}_PASSWORD", "") if name else ""
    if "@" in parts.netloc or not (username or password):
        return url
    user_info = f"{username}:{password}" if password else username
    return urlunsplit((parts.scheme, f"{user_info}@{parts.netloc}", parts.path, parts.query,
                       parts.fragment))


def direct_version(reference: str) -> str:
    """The version a direct reference pins: the version in a wheel's or sdist's file name,
    else the reference itself (a commit, a path)."""
    filename = unquote(urlsplit(reference).path.rsplit("/", 1)[-1])  # `%2B`: a `+`
    wheel = re.match(r"^[^-]+-(?P<version>[^-]+)-.*\.whl$", filename)
    sdist = re.match(r"^.+-(?P<version>[0-9][^-]*)\.(tar\.gz|zip)$", filename)
    found = wheel or sdist
    return found["version"] if found else reference


def inside_project(project: Path, target: str, where: str, what: str) -> Path | None:
    """The directory `target` (relative to the project) when it lies inside the project and is
    not the project itself; None for the project; refused outside it."""
    root = project.resolve()
    directory = (project / target).resolve()
    if directory == root:
        return None
    if root not in directory.parents:
        raise refused(f"{where}: {what} of {directory} outside the project ({root}) cannot be"
                       " reproduced")
    return directory


def _show(source: Mapping[str, Any]) -> str:
    return masked(", ".join(f"{key} = {value}" for key, value in source.items()))


def refused(message: str) -> GateError:
    return GateError(masked(message), kind=ErrorKind.LOCKFILE)
