"""Find lockfiles and parse their pins: raw sha256 as the identity, name -> versions for diffs."""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from repro_gate.errors import one_line

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

Pins = dict[str, list[str]]

# File name patterns, in the order they are reported.
LOCKFILE_PATTERNS = (
    ("requirements", "requirements*.txt"),
    ("requirements", "requirements/*.txt"),
    ("poetry.lock", "poetry.lock"),
    ("uv.lock", "uv.lock"),
    ("Pipfile.lock", "Pipfile.lock"),
    ("pylock.toml", "pylock.toml"),
    ("pylock.toml", "pylock.*.toml"),
    ("conda-lock.yml", "conda-lock.yml"),
    ("conda-lock.yml", "*.conda-lock.yml"),
    ("pixi.lock", "pixi.lock"),
    ("environment.yml", "environment.yml"),
    ("environment.yml", "environment.yaml"),
)

_REQUIREMENT = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*"
    r"(?:(?P<op>===|==|~=|>=|<=|!=|>|<)\s*(?P<version>[^\s;,]+))?"
)
_HASH = re.compile(r"--hash[=\s]+sha256:[0-9a-fA-F]{64}")


def canonical_name(name: str) -> str:
    """PEP 503 normalized project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def find_lockfiles(workdir: Path, stop_at: Path | None = None) -> list[Path]:
    """Lockfiles in `workdir` and its parents up to `stop_at` (the repository root)."""
    directories = [workdir]
    if stop_at is not None and workdir.resolve() != stop_at.resolve():
        for parent in workdir.resolve().parents:
            directories.append(parent)
            if parent == stop_at.resolve():
                break
    found: list[Path] = []
    for directory in directories:
        for _format, pattern in LOCKFILE_PATTERNS:
            for path in sorted(directory.glob(pattern)):
                if path.is_file() and path not in found:
                    found.append(path)
    return found


def format_of(path: Path) -> str:
    """Which lockfile format a file name stands for."""
    name = path.name
    for format_name, pattern in LOCKFILE_PATTERNS:
        if Path(name).match(pattern.rsplit("/", 1)[-1]):
            return format_name
    raise ValueError(f"{name} is not a known lockfile name")


def describe_lockfile(path: Path, label: str) -> dict[str, Any]:
    """Raw sha256, format, parsed pins and whether every pin carries an artifact hash."""
    raw = path.read_bytes()
    format_name = format_of(path)
    entry: dict[str, Any] = {
        "path": label,
        "format": format_name,
        "sha256": hashlib.sha256(raw).hexdigest(),
        "bytes": len(raw),
        "is_lock": format_name != "environment.yml",
    }
    if format_name == "environment.yml":
        entry.update(pins={}, packages=0, hash_pinned=False, unpinned=[],
                     note="not a lock: loose specs are solved again on every install")
        return entry
    try:
        parsed = PARSERS[format_name](raw.decode("utf-8"))
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError,
            yaml.YAMLError) as error:
        entry.update(pins={}, packages=0, hash_pinned=False, unpinned=[],
                     error=f"cannot parse: {one_line(error)}")
        return entry
    entry.update(parsed)
    if format_name == "requirements" and entry["unpinned"]:
        entry["is_lock"] = False
        entry["note"] = "not a lock: some requirements are not pinned with =="
    return entry


def parse_requirements(text: str) -> dict[str, Any]:
    """pip-compile style requirements: `name==X` pins followed by `--hash=sha256:` options."""
    pins: Pins = {}
    unpinned: list[str] = []
    hashed = 0
    total = 0
    for line in _logical_lines(text):
        if line.startswith("-"):
            continue  # options such as -r, -c, --index-url, -e
        match = _REQUIREMENT.match(line)
        if not match:
            continue
        total += 1
        name = canonical_name(match["name"])
        if _HASH.search(line):
            hashed += 1
        version = match["version"]
        if match["op"] in ("==", "===") and version and "*" not in version:
            _add(pins, name, version)
        else:
            unpinned.append(name)
    return _result(pins, total, hashed == total and total > 0, unpinned)


_VIA = re.compile(r"^#\s*via\b\s*(?P<source>.*)$")
_VIA_MORE = re.compile(r"^#\s{2,}(?P<source>\S.*)$")


def requirements_via(text: str) -> dict[str, list[str]]:
    """The `# via` annotations of `uv pip compile` / pip-compile output: name -> what asked for
    it (`-r requirements.in`, `trainer (pyproject.toml)`, or a requiring package's name)."""
    via: dict[str, list[str]] = {}
    current: str | None = None
    listing = False  # inside a multi-line `# via` block
    for raw in text.splitlines():
        line = raw.strip()
        if not line.startswith("#"):
            # indented lines are `--hash` continuations of the current requirement
            if line and not raw[:1].isspace() and not line.startswith("-"):
                match = _REQUIREMENT.match(line)
                current, listing = (canonical_name(match["name"]) if match else None), False
            continue
        head, more = _VIA.match(line), _VIA_MORE.match(line)
        if current and head:
            listing = not head["source"]
            if head["source"]:
                via.setdefault(current, []).append(head["source"].strip())
        elif current and listing and more:
            via.setdefault(current, []).append(more["source"].strip())
        else:
            listing = False
    return via


def requirement_markers(text: str) -> dict[tuple[str, str], str]:
    """Environment markers of pinned lines (`name==X ; sys_platform == "linux"`), by (name, X)."""
    markers: dict[tuple[str, str], str] = {}
    for line in _logical_lines(text):
        match = None if line.startswith("-") else _REQUIREMENT.match(line)
        if match and match["version"] and ";" in line:
            marker = re.split(r"\s--[a-z]", line.split(";", 1)[1])[0].strip()
            markers[(canonical_name(match["name"]), match["version"])] = marker
    return markers


def parse_poetry_lock(text: str) -> dict[str, Any]:
    """poetry.lock: `[[package]]` name/version, artifact hashes under `files`."""
    document = tomllib.loads(text)
    pins: Pins = {}
    hashed = 0
    packages = document.get("package", [])
    for package in packages:
        _add(pins, canonical_name(package["name"]), str(package["version"]))
        files = package.get("files") or document.get("metadata", {}).get("files", {}).get(
            package["name"], []
        )
        if files and all(str(f.get("hash", "")).startswith("sha256:") for f in files):
            hashed += 1
    metadata = document.get("metadata", {})
    return _result(pins, len(packages), packages != [] and hashed == len(packages), [],
                   lock_version=metadata.get("lock-version"),
                   content_hash=metadata.get("content-hash"))


def parse_uv_lock(text: str) -> dict[str, Any]:
    """uv.lock: `[[package]]` with sdist/wheel hashes; the project's own entry has none."""
    document = tomllib.loads(text)
    pins: Pins = {}
    needs_hash = 0
    hashed = 0
    packages = document.get("package", [])
    for package in packages:
        source = package.get("source", {})
        if "version" in package:
            _add(pins, canonical_name(package["name"]), str(package["version"]))
        if any(key in source for key in ("editable", "virtual", "directory", "path")):
            continue  # local projects are built from the checkout itself
        needs_hash += 1
        artifacts = [*package.get("wheels", []), package.get("sdist") or {}]
        if "git" in source or any(str(a.get("hash", "")).startswith("sha256:") for a in artifacts):
            hashed += 1
    return _result(pins, len(packages), needs_hash > 0 and hashed == needs_hash, [],
                   lock_version=document.get("version"))


def parse_pipfile_lock(text: str) -> dict[str, Any]:
    """Pipfile.lock (JSON): `default` and `develop` maps of `"version": "==X"` and `hashes`."""
    document = json.loads(text)
    pins: Pins = {}
    unpinned: list[str] = []
    total = 0
    hashed = 0
    for group in ("default", "develop"):
        for name, spec in document.get(group, {}).items():
            total += 1
            version = str(spec.get("version", ""))
            if version.startswith("=="):
                _add(pins, canonical_name(name), version.removeprefix("=="))
            elif "git" not in spec:
                unpinned.append(canonical_name(name))
            if spec.get("hashes") or "ref" in spec:
                hashed += 1
    meta = document.get("_meta", {})
    return _result(pins, total, total > 0 and hashed == total, unpinned,
                   lock_version=meta.get("pipfile-spec"),
                   content_hash=meta.get("hash", {}).get("sha256"))


def parse_pylock(text: str) -> dict[str, Any]:
    """pylock.toml (PEP 751): `[[packages]]` with hashes on wheels, sdist or archive."""
    document = tomllib.loads(text)
    pins: Pins = {}
    hashed = 0
    packages = document.get("packages", [])
    for package in packages:
        name = canonical_name(package["name"])
        if "version" in package:
            _add(pins, name, str(package["version"]))
        artifacts = [*package.get("wheels", []), package.get("sdist") or {},
                     package.get("archive") or {}]
        has_hash = any("sha256" in (a.get("hashes") or {}) for a in artifacts)
        if has_hash or "commit-id" in (package.get("vcs") or {}):
            hashed += 1
    return _result(pins, len(packages), packages != [] and hashed == len(packages), [],
                   lock_version=document.get("lock-version"))


def parse_conda_lock(text: str) -> dict[str, Any]:
    """conda-lock.yml: `package[]` entries per platform with `hash: {md5, sha256}`."""
    document = yaml.safe_load(text)
    pins: Pins = {}
    hashed = 0
    packages = document.get("package", [])
    platforms = set()
    for package in packages:
        _add(pins, canonical_name(package["name"]), str(package["version"]))
        platforms.add(package.get("platform"))
        if (package.get("hash") or {}).get("sha256") or (package.get("hash") or {}).get("md5"):
            hashed += 1
    return _result(pins, len(packages), packages != [] and hashed == len(packages), [],
                   lock_version=document.get("version"),
                   platforms=sorted(p for p in platforms if p))


def parse_pixi_lock(text: str) -> dict[str, Any]:
    """pixi.lock (rattler-lock): conda entries keyed by URL (name/version from the file
    name) and pypi entries."""
    document = yaml.safe_load(text)
    pins: Pins = {}
    hashed = 0
    packages = document.get("packages", [])
    for package in packages:
        if "conda" in package:
            name, version = _conda_filename(package["conda"])
            name, version = package.get("name", name), package.get("version", version)
        else:
            name, version = package["name"], package.get("version")
        if version is not None:
            _add(pins, canonical_name(str(name)), str(version))
        if package.get("sha256") or package.get("md5"):
            hashed += 1
    return _result(pins, len(packages), packages != [] and hashed == len(packages), [],
                   lock_version=document.get("version"),
                   environments=sorted(document.get("environments", {})))


PARSERS: dict[str, Callable[[str], dict[str, Any]]] = {
    "requirements": parse_requirements,
    "poetry.lock": parse_poetry_lock,
    "uv.lock": parse_uv_lock,
    "Pipfile.lock": parse_pipfile_lock,
    "pylock.toml": parse_pylock,
    "conda-lock.yml": parse_conda_lock,
    "pixi.lock": parse_pixi_lock,
}


def _conda_filename(url: str) -> tuple[str, str]:
    """`.../numpy-1.26.4-py312h8753938_0.conda` -> ("numpy", "1.26.4")."""
    filename = url.rsplit("/", 1)[-1]
    for suffix in (".conda", ".tar.bz2"):
        filename = filename.removesuffix(suffix)
    name, version, _build = filename.rsplit("-", 2)
    return name, version


def _logical_lines(text: str) -> list[str]:
    """Lines with backslash continuations joined and comments removed."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if line:
            lines.append(line)
    if pending.strip():
        lines.append(pending.strip())
    return lines


def _add(pins: Pins, name: str, version: str) -> None:
    versions = pins.setdefault(name, [])
    if version not in versions:
        versions.append(version)
        versions.sort()


def _result(pins: Pins, packages: int, hash_pinned: bool, unpinned: list[str],
            **extra: Any) -> dict[str, Any]:
    result = {
        "packages": packages,
        "pins": dict(sorted(pins.items())),
        "hash_pinned": hash_pinned,
        "unpinned": sorted(set(unpinned)),
    }
    result.update({key: value for key, value in extra.items() if value is not None})
    return result
