"""The trajectory file: one JSON line per optimizer step, flushed as it is written.

On an accelerator a step's line is written at the next step (its values are read back lagged).
The gate follows the file from its side while the run lasts (fail-fast, gate/fail_fast.py): the
probe is given no other run's records to match.
"""

from __future__ import annotations

import json
from typing import Any, Literal, TextIO


class TrajectoryWriter:
    """Appends step records to trajectory.jsonl, created at the first step."""

    def __init__(self, path: str, append: bool = False) -> None:
        self.path = path
        # The resumed process of the resume check goes on with the run's file.
        self._mode: Literal["a", "w"] = "a" if append else "w"
        self._handle: TextIO | None = None

    def append(self, record: dict[str, Any]) -> None:
        """Write one step's line and flush it, so a killed run keeps every finished step."""
        if self._handle is None:
            self._handle = open(self.path, self._mode, encoding="utf-8")  # noqa: SIM115 (kept open)
        self._handle.write(json.dumps(record) + "\n")
        self._handle.flush()

    def extend(self, records: list[dict[str, Any]]) -> None:
        """Write the records completed at once (on an accelerator, the previous step's)."""
        for record in records:
            self.append(record)

    def flush(self) -> None:
        """Flush what was written; nothing when no step was."""
        if self._handle is not None:
            self._handle.flush()
