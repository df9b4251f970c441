"""Comparing JSON and YAML metric files key by key, numerically aware."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeGuard

import yaml

from repro_gate import parsing
from repro_gate.compare.document import ArtifactResult
from repro_gate.compare.fields import FieldPattern, Segment
from repro_gate.compare.files import compare_bytes
from repro_gate.compare.status import (
    DIFFERENT,
    EQUAL,
    MISSING_IN_A,
    MISSING_IN_B,
    WITHIN_TOLERANCE,
    worst,
)
from repro_gate.compare.tolerance import Tolerance
from repro_gate.errors import one_line

ROOT = "(root)"
# The status of a field left out by `compare.ignore`; such fields go to the item's `ignored`.
IGNORED = "ignored"
MISSING = object()  # a key or index the other document has
# A metric file may hold long per-step lists; keep the manifest small.
MAX_KEYS_LISTED = 1000


class UnparseableError(ValueError):
    """The file is not valid JSON/YAML; caught by `compare_structured`, which compares bytes."""


def compare_structured(
    path_a: Path,
    path_b: Path,
    rel_path: str,
    kind: str,
    tolerance: Tolerance | None,
    ignore: tuple[FieldPattern, ...] = (),
) -> ArtifactResult:
    """An `artifact_comparison` of kind `json` or `yaml`; falls back to bytes when unparseable.

    Fields matching an `ignore` pattern (and everything under them) are not compared; the
    result lists them under `ignored`.
    """
    # Bytes cannot leave a field out: say so rather than fail silently on an ignored field.
    unapplied = "; compare.ignore not applied" if ignore else ""
    try:
        value_a = parse(path_a, kind)
        value_b = parse(path_b, kind)
    except UnparseableError as error:
        return compare_bytes(
            path_a, path_b, rel_path,
            note=f"not valid {kind.upper()} ({error}); compared by bytes{unapplied}",
        )
    except parsing.OverBudget as error:
        return compare_bytes(
            path_a, path_b, rel_path,
            note=f"{kind.upper()} over the parsing budget ({error}); compared by bytes{unapplied}",
        )
    try:
        diffs = list(diff_values(value_a, value_b, tolerance, ignore=ignore))
    except RecursionError:
        return compare_bytes(
            path_a, path_b, rel_path,
            note=f"{kind.upper()} nested too deeply to walk; compared by bytes{unapplied}",
        )
    return structured_result(rel_path, kind, diffs, tolerance)


def structured_result(
    rel_path: str, kind: str, diffs: list[dict[str, Any]], tolerance: Tolerance | None
) -> ArtifactResult:
    """Assemble the artifact comparison from per-key results, listing only non-equal keys and
    the ignored fields."""
    ignored = [_without_status(diff) for diff in diffs if diff["status"] == IGNORED]
    compared = [diff for diff in diffs if diff["status"] != IGNORED]
    unequal = [diff for diff in compared if diff["status"] != EQUAL]
    result: ArtifactResult = {
        "path": rel_path,
        "kind": kind,
        "status": worst(diff["status"] for diff in compared),
    }
    if tolerance is not None:
        result["tolerance"] = tolerance.as_dict()
    note = f"{len(compared) - len(unequal)} of {len(compared)} values equal"
    if len(unequal) > MAX_KEYS_LISTED:
        note += f"; first {MAX_KEYS_LISTED} of {len(unequal)} differing keys listed"
    if ignored:
        note += f"; {len(ignored)} fields ignored (compare.ignore)"
    result["note"] = note
    if unequal:
        result["keys"] = unequal[:MAX_KEYS_LISTED]
    if ignored:
        result["ignored"] = ignored[:MAX_KEYS_LISTED]
    return result


def _without_status(diff: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in diff.items() if name != "status"}


def parse(path: Path, kind: str) -> Any:
    """The document in a JSON or YAML file (a list of documents for multi-document YAML).

    Raises parsing.OverBudget for a file too large, too deep, or whose YAML aliases expand
    past the node budget.
    """
    try:
        text = parsing.read_text(path)
        if kind == "json":
            return parsing.load_json(text)
        documents = parsing.load_yaml_all(text)
    except (UnicodeDecodeError, ValueError, yaml.YAMLError) as error:
        raise UnparseableError(one_line(error)) from error
    return documents[0] if len(documents) == 1 else documents


def diff_values(
    a: Any,
    b: Any,
    tolerance: Tolerance | None,
    key: str = ROOT,
    ignore: tuple[FieldPattern, ...] = (),
    path: tuple[Segment, ...] = (),
) -> Iterator[dict[str, Any]]:
    """One `key_diff` per leaf of the union of both documents (equal ones included), and one
    entry of status IGNORED per field an `ignore` pattern matches (not walked further)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for name in list(a) + [name for name in b if name not in a]:
            child = (child_key(key, name), (*path, str(name)))
            yield from diff_child(a.get(name, MISSING), b.get(name, MISSING), child,
                                  tolerance, ignore)
    elif isinstance(a, list) and isinstance(b, list):
        for index in range(max(len(a), len(b))):
            child = (f"{'' if key == ROOT else key}[{index}]", (*path, index))
            yield from diff_child(a[index] if index < len(a) else MISSING,
                                  b[index] if index < len(b) else MISSING,
                                  child, tolerance, ignore)
    else:
        yield diff_leaf(key, a, b, tolerance)


def diff_child(
    a: Any,
    b: Any,
    child: tuple[str, tuple[Segment, ...]],
    tolerance: Tolerance | None,
    ignore: tuple[FieldPattern, ...],
) -> Iterator[dict[str, Any]]:
    """The entries of one key or list item (`child`: its key path and segments); a or b is
    MISSING where only the other document has it."""
    key, path = child
    if any(pattern.matches(path) for pattern in ignore):
        yield ignored_field(key, a, b)
    elif b is MISSING:
        yield {"key": key, "status": MISSING_IN_B, "a": summary(a)}
    elif a is MISSING:
        yield {"key": key, "status": MISSING_IN_A, "b": summary(b)}
    else:
        yield from diff_values(a, b, tolerance, key, ignore, path)


def ignored_field(key: str, a: Any, b: Any) -> dict[str, Any]:
    """An `ignored` entry: the key path, whether the values differ, and both when they do."""
    same = a is not MISSING and b is not MISSING and all(
        diff["status"] == EQUAL for diff in diff_values(a, b, None)
    )
    entry: dict[str, Any] = {"key": key, "status": IGNORED, "differs": not same}
    if not same:
        entry.update({side: summary(value) for side, value in (("a", a), ("b", b))
                      if value is not MISSING})
    return entry


def diff_leaf(key: str, a: Any, b: Any, tolerance: Tolerance | None) -> dict[str, Any]:
    """Compare two leaf values: numbers by value (1 == 1.0, NaN == NaN), others by equality."""
    if is_number(a) and is_number(b):
        status, abs_diff = compare_numbers(a, b, tolerance)
        diff: dict[str, Any] = {"key": key, "status": status}
        if status != EQUAL:
            diff.update(a=summary(a), b=summary(b), abs_diff=abs_diff)
        return diff
    if type(a) is type(b) and a == b:
        return {"key": key, "status": EQUAL}
    return {"key": key, "status": DIFFERENT, "a": summary(a), "b": summary(b)}


def compare_numbers(a: float, b: float, tolerance: Tolerance | None) -> tuple[str, float | None]:
    """Status and |a - b| (None when not finite) for two numbers."""
    if a == b or (math.isnan(a) and math.isnan(b)):
        return EQUAL, None
    abs_diff = abs(float(a) - float(b))
    finite_diff = abs_diff if math.isfinite(abs_diff) else None
    if tolerance is not None and tolerance.allows(float(a), float(b)):
        return WITHIN_TOLERANCE, finite_diff
    return DIFFERENT, finite_diff


def is_number(value: object) -> TypeGuard[int | float]:
    """True for int and float, not bool (True is not 1 in a metric file)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def child_key(parent: str, name: Any) -> str:
    """`parent.name`, quoting names that would make the path ambiguous."""
    text = str(name)
    if not text or any(char in text for char in '.[]"') or text == ROOT:
        text = json.dumps(text)
    return text if parent == ROOT else f"{parent}.{text}"


def summary(value: Any) -> Any:
    """A JSON-safe stand-in for a value in the manifest: scalars as such, containers by size."""
    if isinstance(value, dict):
        return f"<mapping with {len(value)} keys>"
    if isinstance(value, (list, tuple)):
        return f"<list of {len(value)} items>"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)
