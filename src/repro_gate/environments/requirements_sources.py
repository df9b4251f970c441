"""Where a requirements file's packages come from: its own options and lines, as pip reads them
(package_sources.py says what is honoured and what is refused).

The file's `--index-url`, `--extra-index-url`, `--find-links`, `--trusted-host`, `--no-index`,
`--pre`, `--prefer-binary`, `--only-binary` and `--no-binary` lines are the index options of
its pins (uv reads them from the group file it installs); `--hash` options go with their pin;
`name @ URL` is a pin at that reference; `-e DIR` inside the project is installed in every
environment; `-e VCS-URL@commit#egg=name` is a pin at that commit.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from repro_gate.environments.package_sources import (
    COMMIT,
    VCS_SCHEMES,
    Origin,
    PackageSources,
    direct_version,
    inside_project,
    masked,
    refused,
)
from repro_gate.fingerprint.lockfiles import canonical_name

# Options of a requirements file that apply to the whole file and that uv reads there too.
_VALUE_OPTIONS = {"-i": "--index-url", "--index-url": "--index-url",
                  "--extra-index-url": "--extra-index-url", "-f": "--find-links",
                  "--find-links": "--find-links", "--trusted-host": "--trusted-host",
                  "--only-binary": "--only-binary", "--no-binary": "--no-binary"}
_FLAG_OPTIONS = ("--no-index", "--pre", "--prefer-binary")
_EDITABLE = ("-e", "--editable")
_NAME = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*")


def requirements_sources(path: Path, text: str, project: Path) -> PackageSources:
    """The origins of a requirements file's pins; relative paths start at `project`."""
    options: list[str] = []
    entries: list[tuple[int, str, tuple[str, ...]]] = []  # line, requirement, hashes
    local: list[Origin] = []
    for number, tokens in _logical_lines(text):
        where = f"{path}:{number}"
        head = tokens[0]
        option, value = _split_option(head, tokens)
        if option in _VALUE_OPTIONS:
            options.append(f"{_VALUE_OPTIONS[option]} {_located(value, project, option)}")
        elif option in _FLAG_OPTIONS:
            options.append(option)
        elif option in _EDITABLE:
            editable = _editable(value, project, where)
            if editable is None:
                continue  # the project itself: it runs from the checkout
            if editable.requirement.startswith("-e "):
                local.append(editable)
            else:
                entries.append((number, editable.requirement, ()))
        elif head.startswith("-"):
            raise refused(f"{where}: {option} is not supported in a lock the check installs")
        else:
            requirement, hashes = _requirement(tokens, where)
            entries.append((number, requirement, hashes))
    group = tuple(options)
    pinned = {}
    for number, requirement, hashes in entries:
        name, version = _pin_of(requirement, f"{path}:{number}")
        pinned[(name, version)] = Origin(group, requirement, hashes)
    return PackageSources(pinned, tuple(local), hash_any=True)


def _logical_lines(text: str) -> Iterator[tuple[int, list[str]]]:
    """(first line number, tokens) of each logical line: continuations joined, comments gone."""
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line, pending = (pending + line).strip(), ""
        if line:
            yield start, line.split()
    if pending.strip():
        yield start, pending.split()


def _split_option(head: str, tokens: list[str]) -> tuple[str, str]:
    """`--index-url=URL`, `--index-url URL`, `-iURL` -> ("--index-url", "URL")."""
    if head.startswith("--") and "=" in head:
        option, _, value = head.partition("=")
        return option, value
    if head.startswith("-") and not head.startswith("--") and len(head) > 2:
        return head[:2], head[2:]
    return head, " ".join(tokens[1:])


def _located(value: str, project: Path, option: str) -> str:
    """A find-links path made absolute; URLs as they are."""
    if option in ("-f", "--find-links") and "://" not in value:
        return str((project / value).resolve())
    return value


def _editable(value: str, project: Path, where: str) -> Origin | None:
    """`-e DIR` inside the project; `-e git+URL@commit#egg=name` installed at that commit;
    None for the project itself."""
    if value.startswith(VCS_SCHEMES):
        name = re.search(r"[#&]egg=([A-Za-z0-9._-]+)", value)
        if name is None:
            raise refused(f"{where}: -e {masked(value)} names no package (#egg=name)")
        reference = _vcs_reference(value.split("#", 1)[0], where)
        return Origin((), f"{canonical_name(name[1])} @ {reference}")
    directory = inside_project(project, value, where, "an editable install")
    return None if directory is None else Origin((), f"-e {directory}")


def _requirement(tokens: list[str], where: str) -> tuple[str, tuple[str, ...]]:
    """A pin or a direct reference, without its marker (only pins that apply are installed),
    and its hashes."""
    hashes, words = [], []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token.startswith("--hash"):
            digest = token.partition("=")[2] or (tokens[index + 1] if index + 1 < len(tokens)
                                                  else "")
            index += 1 if "=" in token else 2
            hashes.append(digest)
            continue
        if token.startswith("-"):
            raise refused(f"{where}: {token} is not supported on a requirement line")
        words.append(token)
        index += 1
    requirement = " ".join(words).split(";", 1)[0].strip()
    if "@" in requirement and "==" not in requirement:
        name, _, url = requirement.partition("@")
        url = url.strip()
        if url.startswith(VCS_SCHEMES):
            url = _vcs_reference(url, where)
        requirement = f"{name.strip()} @ {url}"
    elif "://" in requirement or requirement.startswith((".", "/")):
        raise refused(f"{where}: {masked(requirement)} is a direct reference without a name"
                       " (write name @ URL)")
    return requirement, tuple(hashes)


def _vcs_reference(url: str, where: str) -> str:
    """A VCS URL pinned to a full commit, as it is; anything else is refused."""
    parts = urlsplit(url)
    revision = parts.path.rpartition("@")[2] if "@" in parts.path else ""
    if not COMMIT.fullmatch(revision):
        raise refused(f"{where}: {masked(url)} is a VCS pin without a commit"
                       " (pin it to a full commit hash)")
    return url


def _pin_of(requirement: str, where: str) -> tuple[str, str]:
    """(name, version) of a line as the lock reader pins it: `==version`, or the reference."""
    match = _NAME.match(requirement)
    if match is None:
        raise refused(f"{where}: {masked(requirement)} is not a requirement")
    name, rest = canonical_name(match["name"]), requirement[match.end():].strip()
    if rest.startswith("@"):
        return name, direct_version(rest[1:].strip())
    return name, rest.lstrip("=").strip()
