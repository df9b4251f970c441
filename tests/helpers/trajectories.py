"""Step records as the probe writes them, compared without what differs between any two runs."""

from __future__ import annotations

from typing import Any


def without_times(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The step records without their `time`, the wall clock of each step."""
    return [{k: v for k, v in step.items() if k != "time"} for step in steps]
