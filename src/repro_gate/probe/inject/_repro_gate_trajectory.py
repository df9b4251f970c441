"""The trajectory file: one JSON line per optimizer step, and a reference trajectory to match.

On an accelerator a step's line is written at the next step (its values are read back lagged),
and matched then: fail-fast stops run B one step after its first divergent step.

Fail-fast is bitwise (parameters' digests and the loss's bits), unless
REPRO_GATE_FAIL_FAST_TOLERANCE holds {"atol": x, "rtol": y}: then only the loss is compared,
within |a - b| <= atol + rtol * |b| (b is this run's loss, as the gate's tolerance has it), since
digests cannot be compared within a tolerance. This is the upgrade check's trial runs: a new
package version that moves the loss by an ULP is not a divergence under its tolerance.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TextIO

from _repro_gate_contract import ENV_FAIL_FAST_TOLERANCE


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


class ReferenceTrajectory:
    """A trajectory to match step by step (fail-fast), read at the first comparison."""

    def __init__(self, path: str, on_error: Callable[[str], None]) -> None:
        self.path = path
        self._on_error = on_error
        self._steps: dict[int, dict[str, Any]] | None = None
        self._tolerance = loss_tolerance(os.environ.get(ENV_FAIL_FAST_TOLERANCE), on_error)

    def differs(self, record: dict[str, Any]) -> bool:
        """True when the reference has this step with other parameters or another loss (with a
        tolerance: with a loss outside it)."""
        if self._steps is None:
            self._steps = self._load()
        expected = self._steps.get(record["step"])
        if expected is None:
            return False
        if self._tolerance is not None:
            return self._loss_differs(expected.get("loss"), record.get("loss"), self._tolerance)
        return bool(expected.get("params") != record["params"]
                    or expected.get("loss") != record["loss"])

    def _loss_differs(self, expected: Any, loss: Any, tolerance: LossTolerance) -> bool:
        if expected is None or loss is None or expected == loss:
            return False  # a step without a loss on either side has nothing to compare
        try:
            return not tolerance.allows(float.fromhex(expected), float.fromhex(loss))
        except (TypeError, ValueError) as error:
            self._on_error(f"comparing the loss {loss!r} with {expected!r}: {error!r}")
            return True  # what the bitwise comparison says

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


@dataclass(frozen=True)
class LossTolerance:
    """Two losses a (the reference's) and b (this run's) agree when |a - b| <= atol + rtol*|b|.

    The gate's rule (repro_gate/compare/tolerance.py), copied: NaN agrees with NaN, an infinity
    only with itself; tests/probe/test_probe_contract.py holds the two to the same answers.
    """

    atol: float
    rtol: float

    def allows(self, a: float, b: float) -> bool:
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        if math.isinf(a) or math.isinf(b):
            return a == b
        return abs(a - b) <= self.atol + self.rtol * abs(b)


def loss_tolerance(value: str | None, on_error: Callable[[str], None]) -> LossTolerance | None:
    """The tolerance in the variable's value; None (bitwise) when unset or malformed (reported)."""
    if not value:
        return None
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    numbers = parsed.values() if isinstance(parsed, dict) else ()
    if (not isinstance(parsed, dict) or sorted(parsed) != ["atol", "rtol"]
            or not all(_non_negative(number) for number in numbers)):
        on_error(f'{ENV_FAIL_FAST_TOLERANCE}={value!r} is not {{"atol": x, "rtol": y}} with '
                 "finite x, y >= 0: fail-fast is bitwise")
        return None
    return LossTolerance(float(parsed["atol"]), float(parsed["rtol"]))


def _non_negative(number: Any) -> bool:
    return (isinstance(number, (int, float)) and not isinstance(number, bool)
            and math.isfinite(number) and number >= 0)
