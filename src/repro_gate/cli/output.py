"""How the read-only commands print a document: JSON for tools, lines for people."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from repro_gate.errors import printable


def print_document(
    document: dict[str, Any], as_json: bool, describe: Callable[[dict[str, Any]], list[str]]
) -> None:
    """The document as sorted, indented JSON on stdout, or the lines `describe` gives."""
    if as_json:
        json.dump(document, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
        return
    for line in describe(document):
        print(printable(line))  # paths and names from outside: control characters escaped
