"""`repro-gate diff A B`: what changed between two environments (manifests or fingerprints)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from repro_gate import validation
from repro_gate.cli.output import print_document
from repro_gate.errors import EXIT_FAIL, EXIT_PASS, ErrorKind, GateError
from repro_gate.fingerprint.environment_diff import CATEGORIES, environment_diff
from repro_gate.manifest import read_document


def add_parser(subparsers: Any, name: str) -> None:
    """Register `diff`."""
    parser = subparsers.add_parser(
        name,
        help="list what changed between two manifests or fingerprints",
        description="Compare two environments (run manifests or `repro-gate fingerprint --json`"
        " output, detected automatically) and list the changes by category."
        " Exit 0 when equal, 1 when they differ, 2 on bad input.",
    )
    parser.add_argument("old", type=Path, help="the earlier manifest or fingerprint")
    parser.add_argument("new", type=Path, help="the later manifest or fingerprint")
    parser.add_argument("--json", action="store_true", help="print the diff as JSON")


def run(args: argparse.Namespace) -> int:
    """`repro-gate diff`: its arguments as `diff`'s parameters."""
    return diff(args.old, args.new, as_json=args.json)


def diff(old_path: Path, new_path: Path, *, as_json: bool = False) -> int:
    """Print the changes; 0 equal, 1 different, 2 (GateError) bad input."""
    old = _checked(read_document(old_path, kind=ErrorKind.INPUT), old_path)
    new = _checked(read_document(new_path, kind=ErrorKind.INPUT), new_path)
    result = environment_diff(old, new)
    print_document(result, as_json, describe)
    return EXIT_PASS if result["equal"] else EXIT_FAIL


def _checked(document: dict[str, Any], path: Path) -> dict[str, Any]:
    """A fingerprint document checked against its schema (a manifest already was, when read):
    the diff reads every field, so a hand-edited or truncated one is bad input, not a crash."""
    if "schema_version" in document:
        return document
    schema = "fingerprint-document" if "fingerprint" in document else "fingerprint"
    problems = validation.errors(schema, document)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise GateError(f"{path}: not a valid fingerprint: {problems[0]}{more}",
                        kind=ErrorKind.INPUT)
    return document


def describe(result: dict[str, Any]) -> list[str]:
    """Summary line, then the changes grouped by category."""
    if result["equal"]:
        return [f"environments are equal (config_hash {result['new_config_hash'][:12]})"]
    count = len(result["changes"])
    lines = [f"{count} {'change' if count == 1 else 'changes'} (config_hash"
             f" {result['old_config_hash'][:12]} -> {result['new_config_hash'][:12]})"]
    for category in CATEGORIES:
        messages = [c["message"] for c in result["changes"] if c["category"] == category]
        if messages:
            lines.append(f"{category}:")
            lines.extend(f"  {message}" for message in messages)
    return lines
