"""Compare two per-step trajectories recorded by the probe and find the first divergent step."""

from __future__ import annotations

from typing import Any, TypedDict


class FirstDivergence(TypedDict):
    step: int
    parameters: list[str]
    loss_differs: bool | None
    runs: list[str]


class TrajectoryComparison(TypedDict):
    steps_compared: int
    status: str  # equal | different | not_recorded | length_differs
    steps: dict[str, int]
    first_divergence: FirstDivergence | None


def compare_trajectories(
    a: list[dict[str, Any]], b: list[dict[str, Any]], runs: tuple[str, str]
) -> TrajectoryComparison:
    """Walk both trajectories step by step; report the first step whose digests or loss differ.

    Parameters are listed in model order (the order the probe recorded them in run `a`).
    """
    steps = {runs[0]: len(a), runs[1]: len(b)}
    if not a and not b:
        return {"steps_compared": 0, "status": "not_recorded", "steps": steps,
                "first_divergence": None}
    by_step_b = {entry["step"]: entry for entry in b}
    compared = 0
    for entry_a in a:
        entry_b = by_step_b.get(entry_a["step"])
        if entry_b is None:
            break
        compared += 1
        divergence = _divergence_at(entry_a, entry_b, runs)
        if divergence is not None:
            return {"steps_compared": compared, "status": "different", "steps": steps,
                    "first_divergence": divergence}
    status = "equal" if len(a) == len(b) else "length_differs"
    return {"steps_compared": compared, "status": status, "steps": steps, "first_divergence": None}


def _divergence_at(
    a: dict[str, Any], b: dict[str, Any], runs: tuple[str, str]
) -> FirstDivergence | None:
    params_a: dict[str, str] = a.get("params", {})
    params_b: dict[str, str] = b.get("params", {})
    differing = [name for name, digest in params_a.items() if params_b.get(name) != digest]
    differing += [name for name in params_b if name not in params_a]
    loss_a, loss_b = a.get("loss"), b.get("loss")
    loss_differs = None if loss_a is None or loss_b is None else loss_a != loss_b
    if not differing and not loss_differs:
        return None
    return {"step": int(a["step"]), "parameters": differing, "loss_differs": loss_differs,
            "runs": list(runs)}
