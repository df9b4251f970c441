"""How N runs of the same training differ: per step the loss, per tensor its summaries.

The loss is read from the probe's trajectory (its exact bits, as a hex float); the tensors from
each run's checkpoints with compare/'s readers, which need no torch. A tensor's summaries are
its norm and its largest absolute value, what a golden trajectory keeps for comparisons under
a tolerance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict

import numpy as np

from repro_gate.compare.artifacts import TORCH_SUFFIXES
from repro_gate.errors import GateError

SUMMARIES = ("norm", "max_abs")


class StepSpread(TypedDict):
    """The loss of one step across the runs."""

    step: int
    min: float
    max: float
    max_abs_difference: float  # max - min: the largest difference between two runs
    max_rel_difference: float  # that, relative to the larger magnitude


class TensorSpread(TypedDict):
    """One tensor's summaries across the runs, and their largest differences."""

    artifact: str
    name: str
    norm: list[float]  # per run, in order
    max_abs: list[float]
    max_abs_difference: float
    max_rel_difference: float


def difference(values: Sequence[float]) -> tuple[float, float]:
    """The largest absolute difference between two of `values`, and that relative to the
    largest magnitude among them (0 when all are 0)."""
    low, high = min(values), max(values)
    absolute = high - low
    scale = max(abs(low), abs(high))
    return absolute, (absolute / scale if scale > 0 else 0.0)


def loss_values(trajectory: list[dict[str, Any]]) -> dict[int, float]:
    """Each step's loss in one run, for the steps that recorded one."""
    values = {}
    for entry in trajectory:
        step, loss = entry.get("step"), entry.get("loss")
        if isinstance(step, int) and isinstance(loss, str):
            try:
                value = float.fromhex(loss)
            except ValueError:
                continue
            if math.isfinite(value):  # a NaN or infinite loss has no spread to measure
                values[step] = value
    return values


def loss_spread(trajectories: Sequence[list[dict[str, Any]]]) -> list[StepSpread]:
    """Per step that every run recorded, the spread of its loss."""
    runs = [loss_values(trajectory) for trajectory in trajectories]
    steps = sorted(set.intersection(*(set(run) for run in runs))) if runs else []
    spread: list[StepSpread] = []
    for step in steps:
        values = [run[step] for run in runs]
        absolute, relative = difference(values)
        spread.append({"step": step, "min": min(values), "max": max(values),
                       "max_abs_difference": absolute, "max_rel_difference": relative})
    return spread


def tensor_spread(artifacts: Sequence[dict[str, Path]]) -> tuple[list[TensorSpread], list[str]]:
    """Per tensor of every checkpoint all runs wrote, the spread of its summaries; and the
    artifacts left out, each with the reason."""
    common = [rel for rel in artifacts[0] if all(rel in run for run in artifacts[1:])]
    spread: list[TensorSpread] = []
    skipped: list[str] = []
    for rel in common:
        summaries = [_summaries(run[rel], rel) for run in artifacts]
        if any(isinstance(summary, str) for summary in summaries):
            reason = next(summary for summary in summaries if isinstance(summary, str))
            skipped.append(f"{rel}: {reason}")
            continue
        tables: list[dict[str, dict[str, float]]] = summaries  # type: ignore[assignment]
        names = [name for name in tables[0] if all(name in table for table in tables[1:])]
        spread += [_tensor(rel, name, [table[name] for table in tables]) for name in names]
    return spread, skipped


def _tensor(rel: str, name: str, runs: list[dict[str, float]]) -> TensorSpread:
    differences = [difference([run[key] for run in runs]) for key in SUMMARIES]
    return {"artifact": rel, "name": name,
            "norm": [run["norm"] for run in runs], "max_abs": [run["max_abs"] for run in runs],
            "max_abs_difference": max(d[0] for d in differences),
            "max_rel_difference": max(d[1] for d in differences)}


def _summaries(path: Path, rel: str) -> dict[str, dict[str, float]] | str:
    """Each floating tensor's norm and max abs in one checkpoint (finite ones: a NaN has no
    spread), or why the checkpoint cannot be read."""
    from repro_gate.compare import checkpoints

    suffix = path.suffix.lower()
    if suffix not in TORCH_SUFFIXES and suffix != ".safetensors":
        return "not a checkpoint"
    load = checkpoints.load_torch if suffix in TORCH_SUFFIXES else checkpoints.load_safetensors
    try:
        checkpoint = load(path, rel, "calibration")
    except (checkpoints.NotComparable, GateError) as error:
        return str(error)
    table = {}
    for name, tensor in checkpoint.tensors.items():
        if tensor.dtype.kind != "f" or tensor.size == 0:
            continue
        values = tensor.astype(np.float64).reshape(-1)
        norm, largest = float(np.linalg.norm(values)), float(np.max(np.abs(values)))
        if math.isfinite(norm) and math.isfinite(largest):
            table[name] = {"norm": norm, "max_abs": largest}
    return table
