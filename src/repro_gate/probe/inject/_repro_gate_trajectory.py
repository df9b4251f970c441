"""The trajectory file: one JSON line per optimizer step, and a reference trajectory to match.

On an accelerator a step's line is written at the next step (its values are read back lagged),
and matched then: fail-fast stops run B one step after its first divergent step.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TextIO


class TrajectoryWriter:
    """Appends step records to trajectory.jsonl, created at the first step."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._handle: TextIO | None = None

    def append(self, record: dict[str, Any]) -> None:
        """Write one step's line and flush it, so a killed run keeps every finished step."""
        if self._handle is None:
            self._handle = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 (kept open)
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


class ReferenceTrajectory:
    """A trajectory to match step by step (fail-fast), read at the first comparison."""

    def __init__(self, path: str, on_error: Callable[[str], None]) -> None:
        self.path = path
        self._on_error = on_error
        self._steps: dict[int, dict[str, Any]] | None = None

    def differs(self, record: dict[str, Any]) -> bool:
        """True when the reference has this step with other parameters or another loss."""
        if self._steps is None:
            self._steps = self._load()
        expected = self._steps.get(record["step"])
        if expected is None:
            return False
        return expected.get("params") != record["params"] or expected.get("loss") != record["loss"]

    def _load(self) -> dict[int, dict[str, Any]]:
        steps: dict[int, dict[str, Any]] = {}
        try:
            with open(self.path, encoding="utf-8") as handle:
                for line in handle:
                    if not line.strip():
                        continue
                    try:
                        entry = json.loads(line)
                    except json.JSONDecodeError:
                        break  # a partial last line of a killed run
                    steps[int(entry["step"])] = entry
        except (OSError, KeyError, TypeError, ValueError) as error:
            self._on_error(f"reading the reference trajectory: {error!r}")
        return steps
