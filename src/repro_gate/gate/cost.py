"""The cost of determinism: deterministic step time against default-mode step time."""

from __future__ import annotations

import random
import statistics
from typing import Any, TypedDict

BOOTSTRAP_SAMPLES = 1000
MIN_STEPS_FOR_INTERVAL = 5


class Cost(TypedDict, total=False):
    pct: float | None
    basis: str  # step_median | wall
    det_step_seconds: float | None
    default_step_seconds: float | None
    det_wall_seconds: float | None
    default_wall_seconds: float | None
    warmup_steps: int
    steps_timed: int
    ci95_pct: list[float] | None
    note: str


def step_times(trajectory: list[dict[str, Any]], warmup: int) -> list[float]:
    """Per-step wall times after the warm-up; at least one step is kept when any was recorded."""
    times = [float(entry["time"]) for entry in trajectory if entry.get("time") is not None]
    skip = min(warmup, max(len(times) - 1, 0))
    return times[skip:]


def cost_of_determinism(
    det_trajectories: list[list[dict[str, Any]]],
    default_trajectory: list[dict[str, Any]],
    det_wall_seconds: float,
    default_wall_seconds: float,
    warmup: int,
) -> Cost:
    """cost % = (median deterministic step - median default step) / median default step x 100.

    Falls back to whole-run wall time when either side recorded no steps.
    """
    det_steps = [t for trajectory in det_trajectories for t in step_times(trajectory, warmup)]
    default_steps = step_times(default_trajectory, warmup)
    cost: Cost = {
        "det_wall_seconds": round(det_wall_seconds, 6),
        "default_wall_seconds": round(default_wall_seconds, 6),
        "warmup_steps": warmup,
    }
    if det_steps and default_steps:
        det = statistics.median(det_steps)
        default = statistics.median(default_steps)
        cost.update(
            basis="step_median",
            det_step_seconds=det,
            default_step_seconds=default,
            steps_timed=len(default_steps),
            pct=_pct(det, default),
            ci95_pct=bootstrap_interval(det_steps, default_steps),
        )
        return cost
    cost.update(
        basis="wall",
        det_step_seconds=None,
        default_step_seconds=None,
        steps_timed=0,
        pct=_pct(det_wall_seconds, default_wall_seconds),
        note="no optimizer steps were seen, so whole-run wall times were compared",
    )
    return cost


def bootstrap_interval(det_steps: list[float], default_steps: list[float]) -> list[float] | None:
    """95% bootstrap interval of the cost %, resampling both sides' step times.

    A fixed seed keeps the report itself reproducible; too few steps give None.
    """
    if min(len(det_steps), len(default_steps)) < MIN_STEPS_FOR_INTERVAL:
        return None
    rng = random.Random(0)
    samples = []
    for _ in range(BOOTSTRAP_SAMPLES):
        det = statistics.median(rng.choices(det_steps, k=len(det_steps)))
        default = statistics.median(rng.choices(default_steps, k=len(default_steps)))
        pct = _pct(det, default)
        if pct is not None:
            samples.append(pct)
    if not samples:
        return None
    samples.sort()
    return [samples[int(0.025 * len(samples))], samples[int(0.975 * len(samples)) - 1]]


def _pct(det: float, default: float) -> float | None:
    if default <= 0:
        return None
    return round((det - default) / default * 100.0, 2)
