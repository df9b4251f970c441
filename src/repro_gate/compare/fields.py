"""Key paths of JSON/YAML documents and the `compare.ignore` patterns that match them.

A key path is what the comparison reports: names joined by `.`, list indexes as `[N]`, names
holding `.`, `[`, `]` or `"` in double quotes (JSON string syntax). A pattern is a key path whose
name segments may hold `*` wildcards: a segment `*` matches one key or list index, `[*]` one list
index, `**` any number of levels (none included), and `*_at` a name ending in `_at`.
The config schema checks the syntax; `parse_path` assumes it.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass

from repro_gate.compare.tolerance import artifact_matches
from repro_gate.config import CompareConfig

# A path segment is a key name (str) or a list index (int).
Segment = str | int
# Tokens of a key path: a quoted name, a bare name, an index `[N]` or `[*]`, a separator.
TOKEN = re.compile(
    r'(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<index>\[(?:\*|[0-9]+)\])|(?P<name>[^.\[\]"]+)|\.'
)
ANY_INDEX = -1  # the pattern `[*]`


@dataclass(frozen=True)
class FieldPattern:
    """One `fields` entry of `compare.ignore`, parsed."""

    text: str
    segments: tuple[Segment, ...]  # fnmatch patterns of names, "*", "**"; indexes, ANY_INDEX

    def matches(self, path: tuple[Segment, ...]) -> bool:
        """Whether the key at `path` is one this pattern names."""
        return _match(self.segments, path)


def parse_pattern(text: str) -> FieldPattern:
    """A `compare.ignore` field: quoted names are literal, bare names may hold `*` and `?`."""
    segments: list[Segment] = []
    for match in TOKEN.finditer(text):
        if match["quoted"]:
            segments.append(_escape(json.loads(match["quoted"])))
        elif match["index"]:
            inner = match["index"][1:-1]
            segments.append(ANY_INDEX if inner == "*" else int(inner))
        elif match["name"]:
            segments.append(match["name"])
    return FieldPattern(text, tuple(segments))


def parse_path(key: str) -> tuple[Segment, ...]:
    """The segments of a key path the comparison reported (`runs[0]."a.b"` -> runs, 0, a.b)."""
    segments: list[Segment] = []
    for match in TOKEN.finditer(key):
        if match["quoted"]:
            segments.append(json.loads(match["quoted"]))
        elif match["index"]:
            segments.append(int(match["index"][1:-1]))
        elif match["name"]:
            segments.append(match["name"])
    return tuple(segments)


def patterns_for(policy: CompareConfig, rel_path: str) -> tuple[FieldPattern, ...]:
    """The ignored fields of the artifact at `rel_path`: those of every entry whose glob matches
    the relative path or its basename (unlike tolerances, entries add up)."""
    return tuple(
        parse_pattern(text)
        for rule in policy.ignore if artifact_matches(rule.glob, rel_path)
        for text in rule.fields
    )


def _match(pattern: tuple[Segment, ...], path: tuple[Segment, ...]) -> bool:
    if not pattern:
        return not path
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_match(rest, path[start:]) for start in range(len(path) + 1))
    return bool(path) and _segment_matches(head, path[0]) and _match(rest, path[1:])


def _segment_matches(pattern: Segment, segment: Segment) -> bool:
    if pattern == "*":
        return True
    if isinstance(pattern, int):
        return isinstance(segment, int) and pattern in (ANY_INDEX, segment)
    return isinstance(segment, str) and fnmatch.fnmatchcase(segment, pattern)


def _escape(name: str) -> str:
    """A quoted name as an fnmatch pattern matching just itself."""
    return "".join(f"[{char}]" if char in "*?[" else char for char in name)
