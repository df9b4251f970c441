"""Run A against its golden trajectory: step by step, then artifact by artifact.

Bitwise unless `golden.tolerance` is set: then a step's loss may differ within
`atol + rtol * |golden|`, with at most `steps_outside` steps outside it, and a checkpoint's
tensors within the tensor tolerance on their summaries (norm, max abs). The first divergent
step gets the cause the gate gives between runs A and B: the first record of the step that
differs (initial parameters, inputs, loss, gradients, parameters after the update).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from repro_gate.compare.cause import Cause
from repro_gate.golden.document import BUFFERS, GRADIENTS, INPUTS, LOSS, PARAMETERS, STEP, Row

SAME, WITHIN_TOLERANCE, CHANGED, NO_GOLDEN = "same", "within_tolerance", "changed", "no_golden"
MAX_DELTA_POINTS = 100  # points of `loss_delta`, evenly spread over the steps
# The records of a step in the order the step makes them, and the cause each difference names.
RECORDS = ((INPUTS, Cause.INPUT), (LOSS, Cause.FORWARD), (GRADIENTS, Cause.BACKWARD),
           (PARAMETERS, Cause.OPTIMIZER), (BUFFERS, Cause.BUFFERS))


@dataclass(frozen=True)
class Tolerance:
    """`golden.tolerance`; None fields: that part is compared bitwise."""

    loss: dict[str, float] | None = None  # rtol, atol, steps_outside
    tensors: dict[str, float] | None = None  # rtol, atol

    @classmethod
    def from_config(cls, value: dict[str, Any] | None) -> Tolerance:
        value = value or {}
        return cls(value.get("loss"), value.get("tensors"))


def within(run: float, golden: float, bounds: dict[str, float]) -> bool:
    return abs(run - golden) <= bounds.get("atol", 0.0) + bounds.get("rtol", 0.0) * abs(golden)


def compare(golden: dict[str, Any], run: dict[str, Any], tolerance: Tolerance,
            renamed_artifacts: frozenset[str] = frozenset()) -> dict[str, Any]:
    """`status`, `steps_compared`, `artifacts_compared`, `first_divergence`,
    `largest_difference` and `loss_delta` of `run` (a golden document of run A, under the
    golden file's tensor names: `renames.py`) against `golden`. `renamed_artifacts`: the
    checkpoints whose tensors were renamed, whose sha256 differs by the names alone when their
    tensors are equal."""
    steps = _compare_steps(golden, run, tolerance)
    artifacts = _compare_artifacts(golden["artifacts"], run["artifacts"], tolerance,
                                   renamed_artifacts)
    differs = steps["differs"] or artifacts["differs"]
    changed = steps["changed"] or artifacts["changed"]
    status = CHANGED if changed else WITHIN_TOLERANCE if differs else SAME
    largest = steps["largest"] or artifacts["largest"]
    return {
        "status": status,
        "steps_compared": steps["compared"],
        "artifacts_compared": artifacts["compared"],
        "first_divergence": steps["first"] or artifacts["first"],
        "largest_difference": largest,
        "loss_delta": spread(steps["deltas"]),
    }


def _compare_steps(golden: dict[str, Any], run: dict[str, Any], tolerance: Tolerance
                   ) -> dict[str, Any]:
    by_step = {row[STEP]: row for row in golden["steps"]}
    deltas: list[dict[str, Any]] = []
    first: dict[str, Any] | None = None
    largest: dict[str, Any] | None = None
    outside = compared = 0
    for row in run["steps"]:
        expected = by_step.get(row[STEP])
        if expected is None:
            break
        compared += 1
        delta = _loss_delta(row, expected)
        if delta is not None:
            deltas.append({"step": row[STEP], "delta": delta})
            if delta != 0 and (largest is None or abs(delta) > largest["value"]):
                largest = {"what": f"loss at step {row[STEP]}", "value": abs(delta)}
        if first is None and _differs(row, expected):
            first = divergence(row, expected, golden, run)
        if row[LOSS] != expected[LOSS] and not _loss_within(row, expected, tolerance):
            outside += 1
    length = len(run["steps"]) != len(golden["steps"])
    if length and first is None:
        first = {"step": compared + 1, "cause": Cause.UNKNOWN,
                 "detail": f"the run recorded {len(run['steps'])} steps, the golden trajectory"
                           f" {len(golden['steps'])}"}
    allowed = (tolerance.loss or {}).get("steps_outside", 0) if tolerance.loss else None
    changed = length or (first is not None and (allowed is None or outside > allowed))
    return {"compared": compared, "first": first, "largest": largest, "deltas": deltas,
            "differs": first is not None, "changed": changed}


def _loss_delta(row: Row, expected: Row) -> float | None:
    if not isinstance(row[LOSS], str) or not isinstance(expected[LOSS], str):
        return None
    delta = float.fromhex(row[LOSS]) - float.fromhex(expected[LOSS])
    return delta if math.isfinite(delta) else None  # an infinite loss has no difference to draw


def _loss_within(row: Row, expected: Row, tolerance: Tolerance) -> bool:
    delta_known = isinstance(row[LOSS], str) and isinstance(expected[LOSS], str)
    if tolerance.loss is None or not delta_known:
        return False
    return within(float.fromhex(row[LOSS]), float.fromhex(expected[LOSS]), tolerance.loss)


def divergence(row: Row, expected: Row, golden: dict[str, Any], run: dict[str, Any]
               ) -> dict[str, Any]:
    """The first divergent step, its cause and what differs."""
    step = row[STEP]
    if step == golden["steps"][0][STEP]:
        initial = _differing("initial", golden, run, "first")
        if initial:
            return {"step": step, "cause": Cause.INITIALIZATION,
                    "detail": f"initial parameters differ: {', '.join(initial[:5])}"}
    for index, cause in RECORDS:
        if index < min(len(row), len(expected)) and row[index] != expected[index]:
            return {"step": step, "cause": cause, "detail": _detail(index, row, expected)}
    return {"step": step, "cause": Cause.UNKNOWN, "detail": "the step's records differ"}


def _differs(row: Row, expected: Row) -> bool:
    """Whether a field both rows hold differs: a format 1 row has no buffers to compare."""
    common = min(len(row), len(expected))
    return row[LOSS:common] != expected[LOSS:common]


def _detail(index: int, row: Row, expected: Row) -> str:
    if index == LOSS:
        return f"loss {expected[LOSS + 1]!r} in the golden trajectory, {row[LOSS + 1]!r} now"
    what = {INPUTS: "the model's inputs", GRADIENTS: "the gradients",
            PARAMETERS: "the parameters after the update", BUFFERS: "the model's buffers"}[index]
    return f"{what} differ (the loss and what comes before are equal)"


def _differing(kind: str, golden: dict[str, Any], run: dict[str, Any], when: str) -> list[str]:
    a = ((golden.get("tensors") or {}).get(when) or {}).get(kind) or {}
    b = ((run.get("tensors") or {}).get(when) or {}).get(kind) or {}
    return [name for name in {**a, **b} if a.get(name) != b.get(name)]


def _compare_artifacts(golden: list[dict[str, Any]], run: list[dict[str, Any]],
                       tolerance: Tolerance, renamed: frozenset[str]) -> dict[str, Any]:
    by_path = {entry["path"]: entry for entry in run}
    result: dict[str, Any] = {"compared": 0, "first": None, "largest": None,
                              "differs": False, "changed": False}
    for expected in golden:
        entry = by_path.pop(expected["path"], None)
        if entry is None:
            _changed(result, f"{expected['path']} is in the golden trajectory, not in run A")
            continue
        result["compared"] += 1
        if entry["sha256"] != expected["sha256"]:
            _compare_tensors(result, expected, entry, tolerance, entry["path"] in renamed)
    for path in by_path:
        _changed(result, f"{path} is in run A, not in the golden trajectory")
    return result


def _compare_tensors(result: dict[str, Any], expected: dict[str, Any], entry: dict[str, Any],
                     tolerance: Tolerance, renamed: bool) -> None:
    golden = {t["name"]: t for t in expected.get("tensors") or []}
    run = {t["name"]: t for t in entry.get("tensors") or []}
    names = [n for n in {**golden, **run} if (golden.get(n) or {}).get("digest")
             != (run.get(n) or {}).get("digest")]
    if renamed and not names:
        return  # the file names its tensors anew; the golden file keeps no other value of it
    result["differs"] = True
    for name in names:
        a, b = golden.get(name), run.get(name)
        gap = _norm_gap(a, b)
        if gap is not None and (result["largest"] is None or gap > result["largest"]["value"]):
            result["largest"] = {"what": f"norm of {entry['path']}:{name}", "value": gap}
        if not _tensor_within(a, b, tolerance):
            _changed(result, f"{entry['path']}: tensor {name} differs")
    if not names:
        _changed(result, f"{entry['path']} differs from the golden file's (sha256)")


def _norm_gap(a: dict[str, Any] | None, b: dict[str, Any] | None) -> float | None:
    if not a or not b or a.get("norm") is None or b.get("norm") is None:
        return None
    return float(abs(b["norm"] - a["norm"]))


def _tensor_within(a: dict[str, Any] | None, b: dict[str, Any] | None,
                   tolerance: Tolerance) -> bool:
    if tolerance.tensors is None or not a or not b:
        return False
    if a["shape"] != b["shape"] or a["dtype"] != b["dtype"]:
        return False
    return all(a[key] is not None and b[key] is not None
               and within(b[key], a[key], tolerance.tensors) for key in ("norm", "max_abs"))


def _changed(result: dict[str, Any], detail: str) -> None:
    result["differs"] = result["changed"] = True
    if result["first"] is None:
        result["first"] = {"step": 0, "cause": Cause.UNKNOWN, "detail": detail}


def spread(deltas: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """At most MAX_DELTA_POINTS of `deltas`, evenly spread, the first and last kept."""
    if len(deltas) <= MAX_DELTA_POINTS:
        return deltas
    last = len(deltas) - 1
    picks = sorted({round(i * last / (MAX_DELTA_POINTS - 1)) for i in range(MAX_DELTA_POINTS)})
    return [deltas[i] for i in picks]
