#!/usr/bin/env python3
"""The release commit's action.yml: `runs.image` pointed at the pushed image by digest.

The branch keeps `image: Dockerfile` (the runner builds the action from source); the release
workflow runs `pin` on a detached HEAD so that `@v1` starts a prebuilt image instead. The
rewrite is textual: only the value of `runs.image` changes, every comment and every other byte
of the file stays as it was. Standard library only, so the workflow needs no install step.

    release_action_yml.py check ACTION_YML             runs.image is still Dockerfile
    release_action_yml.py pin ACTION_YML IMAGE DIGEST  rewrite runs.image in place
    release_action_yml.py notes CHANGELOG VERSION      print the CHANGELOG section of VERSION
    release_action_yml.py version PYPROJECT TAG        the package's version is the tag's

Exit status 0 when done; bad input is one line on stderr and exit status 2.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10, where the package depends on tomli instead
    import tomli as tomllib  # type: ignore[no-redef]

BAD_INPUT = 2
SOURCE_IMAGE = "Dockerfile"
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
# A registry host (with an optional port) and a lower-case repository path, without a tag:
# registries refuse upper case, and `github.repository` may have it.
IMAGE_NAME = re.compile(
    r"[a-z0-9]+(?:[.-][a-z0-9]+)*(?::[0-9]+)?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)+"
)
TOP_LEVEL_RUNS = re.compile(r"runs:[ \t]*(?:#.*)?")
# `key: value  # comment` inside a block mapping; the value is a plain or quoted scalar.
ENTRY = re.compile(
    r"(?P<indent>[ ]*)(?P<key>[\w-]+):[ \t]*"
    r"(?P<value>\"[^\"]*\"|'[^']*'|[^#\s](?:[^#]*[^#\s])?)?"
    r"(?P<rest>[ \t]*(?:#.*)?)"
)
VERSION_HEADING = re.compile(r"##[ \t]+\[?v?(?P<version>[^\]\s]+)\]?")
LINK_DEFINITION = re.compile(r"\[[^\]]+\]:\s")
TAG = re.compile(r"v(?P<core>[0-9]+\.[0-9]+\.[0-9]+)(?:-[0-9A-Za-z.-]+)?")
RELEASE_SEGMENT = re.compile(r"[0-9]+(?:\.[0-9]+)*")


class ReleaseInputError(ValueError):
    """Input the release must not go ahead with; the message is the one line users see."""


@dataclass(frozen=True)
class Entry:
    """One `key: value` line of the `runs:` block: where its value sits in the file."""

    key: str
    value: str  # unquoted
    line: int
    start: int  # offset of the value (quotes included) within the line
    end: int


def _runs_entries(lines: list[str]) -> list[Entry]:
    """The direct entries of the top-level `runs:` block mapping."""
    starts = [i for i, line in enumerate(lines) if TOP_LEVEL_RUNS.fullmatch(line.rstrip("\r\n"))]
    if len(starts) != 1:
        raise ReleaseInputError("action.yml has no top-level `runs:` block mapping")
    entries: list[Entry] = []
    indent: str | None = None
    for number in range(starts[0] + 1, len(lines)):
        text = lines[number].rstrip("\r\n")
        if not text.strip() or text.lstrip().startswith("#"):
            continue
        if not text.startswith((" ", "\t")):
            break  # the next top-level key ends the block
        match = ENTRY.fullmatch(text)
        indent = indent if indent is not None else (match["indent"] if match else None)
        if match is None or match["indent"] != indent:
            continue  # nested content (a list or a mapping below an entry)
        value = match["value"] or ""
        entries.append(Entry(match["key"], value.strip("\"'"), number, *match.span("value")))
    return entries


def _runs_entry(entries: list[Entry], key: str) -> Entry:
    found = [entry for entry in entries if entry.key == key]
    if len(found) != 1:
        raise ReleaseInputError(f"action.yml's `runs:` has {len(found)} `{key}:` entries, not 1")
    return found[0]


def pinned_reference(image: str, digest: str) -> str:
    """`docker://IMAGE@DIGEST`, after checking both parts."""
    if not DIGEST.fullmatch(digest):
        raise ReleaseInputError(f"digest {digest!r} is not sha256:<64 lower-case hex digits>")
    if not IMAGE_NAME.fullmatch(image):
        raise ReleaseInputError(
            f"image {image!r} is not a lower-case registry/repository name without a tag"
        )
    return f"docker://{image}@{digest}"


def check_source(text: str) -> Entry:
    """The `runs.image` entry of a docker action that still builds from the Dockerfile."""
    entries = _runs_entries(text.splitlines(keepends=True))
    using = _runs_entry(entries, "using")
    if using.value != "docker":
        raise ReleaseInputError(f"action.yml runs with {using.value!r}, not docker")
    return _runs_entry(entries, "image")


def pin_image(text: str, image: str, digest: str) -> str:
    """`text` with `runs.image` set to the pinned image; unchanged when already pinned to it."""
    reference = pinned_reference(image, digest)
    entry = check_source(text)
    if entry.value == reference:
        return text  # a second run of the same release
    if entry.value != SOURCE_IMAGE:
        raise ReleaseInputError(
            f"action.yml's runs.image is {entry.value!r}, not {SOURCE_IMAGE!r}: "
            "pin the image on a commit of the branch"
        )
    lines = text.splitlines(keepends=True)
    line = lines[entry.line]
    quote = line[entry.start] if line[entry.start] in "\"'" else ""
    lines[entry.line] = f"{line[: entry.start]}{quote}{reference}{quote}{line[entry.end :]}"
    return "".join(lines)


def release_notes(text: str, version: str) -> str:
    """The body of the `## [VERSION]` section of a Keep a Changelog file."""
    wanted = version.removeprefix("v")
    body: list[str] | None = None
    for line in text.splitlines():
        heading = VERSION_HEADING.fullmatch(line.split(" - ")[0].rstrip())
        if line.startswith("## "):
            if body is not None:
                break
            if heading and heading["version"].lower() == wanted.lower():
                body = []
            continue
        if body is not None and not LINK_DEFINITION.match(line):
            body.append(line)
    notes = "\n".join(body or []).strip()
    if not notes:
        raise ReleaseInputError(f"the changelog has no section, or an empty one, for {version}")
    return notes + "\n"


def check_version(pyproject: str, tag: str) -> str:
    """The package version, when its release segment is the tag's (`1.2.3rc1` for `v1.2.3-rc.1`).

    Without this, an image tagged v1.2.3 could answer `repro-gate --version` with another number.
    """
    match = TAG.fullmatch(tag)
    if match is None:
        raise ReleaseInputError(f"tag {tag!r} is not vMAJOR.MINOR.PATCH[-PRERELEASE]")
    try:
        version = str(tomllib.loads(pyproject)["project"]["version"])
    except (tomllib.TOMLDecodeError, KeyError, TypeError) as error:
        raise ReleaseInputError(f"pyproject.toml has no readable project.version: {error}") \
            from None
    segment = RELEASE_SEGMENT.match(version)
    if segment is None or segment.group() != match["core"]:
        raise ReleaseInputError(f"pyproject.toml's version is {version}, the tag is {tag}")
    return version


def _read(path: str) -> str:
    try:
        # Bytes, not text mode: text mode would turn CRLF line ends into LF.
        return Path(path).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ReleaseInputError(f"cannot read {path}: {error}") from None


def run(argv: list[str]) -> str:
    """Do what argv asks; the line to print."""
    match argv:
        case ["check", action]:
            check = check_source(_read(action))
            if check.value != SOURCE_IMAGE:
                raise ReleaseInputError(f"{action}: runs.image is {check.value!r}, not Dockerfile")
            return f"{action}: runs.image is {SOURCE_IMAGE}"
        case ["pin", action, image, digest]:
            before = _read(action)
            after = pin_image(before, image, digest)
            if after != before:
                Path(action).write_bytes(after.encode("utf-8"))
            return f"{action}: runs.image is {pinned_reference(image, digest)}"
        case ["notes", changelog, version]:
            return release_notes(_read(changelog), version).rstrip("\n")
        case ["version", pyproject, tag]:
            return f"{pyproject}: version {check_version(_read(pyproject), tag)} for {tag}"
    raise ReleaseInputError(
        "usage: release_action_yml.py check ACTION_YML | pin ACTION_YML IMAGE DIGEST"
        " | notes CHANGELOG VERSION | version PYPROJECT TAG"
    )


def main(argv: list[str]) -> int:
    try:
        print(run(argv))
    except ReleaseInputError as error:
        print(f"release_action_yml.py: {error}", file=sys.stderr)
        return BAD_INPUT
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
