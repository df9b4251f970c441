"""Reading the probe's environment and writing its JSON files (atomically: a killed process
never leaves half a file for the gate)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any


def read_json(path: str) -> Any:
    """The JSON value in `path`, or None when it is missing or unreadable."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def write_json(path: str, value: Any) -> None:
    """Write `value` to `path` through a temporary file and a rename."""
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(value, handle, indent=1)
        handle.write("\n")
    os.replace(temporary, path)


def int_env(name: str, default: int | None, on_error: Callable[[str], None]) -> int | None:
    """The integer in variable `name`; `default` when unset or not an integer (reported)."""
    value = os.environ.get(name)
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        on_error(f"{name}={value!r} is not an integer; using {default}")
        return default
