"""The localisation run: the module a divergence in the forward pass starts in.

When the gate has failed bitwise with a first divergence of cause `forward` at step k on rank r,
one more deterministic run, `L`, trains up to step k with the probe's localiser on
(REPRO_GATE_LOCALISE_STEP=k): during step k it runs every module call a second time from the same
inputs and random state, and the first module whose output changes is named in its localise.json
(the probe's `_repro_gate_localise`). A `backward` divergence (equal loss and model output,
different gradients) starts it too: a module whose output changed by less than the model's output
rounds away still changes the gradients, and when run L finds one the cause is `forward` with
that module; otherwise it stays `backward`. Passing gates, tolerance gates and other causes never
start it. It is listed in the manifest's runs[] with `purpose: localisation`, and is never compared,
timed for the cost or counted as a deterministic run. It never changes the verdict: a crash, a
timeout or a missing file gives `localisation.status: failed` with a one-line note.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from repro_gate import probe
from repro_gate.compare.document import Comparison
from repro_gate.config import Config
from repro_gate.errors import GateError, one_line
from repro_gate.gate import training_run
from repro_gate.gate.record import GateState
from repro_gate.launch.base import Launcher, RunSpec

RUN_NAME = "L"
SPARE_RUN_NAME = "localisation"  # when a gate of 12 or more runs already has a run L
PURPOSE = "localisation"
LOCALISED_CAUSES = ("forward", "backward")

Execute = Callable[[RunSpec], training_run.RunRecord]


def localise(
    config: Config,
    launcher: Launcher,
    state: GateState,
    comparison: Comparison,
    execute: Execute,
) -> None:
    """For a bitwise `forward` (or `backward`) divergence: run L, then set the divergence's
    `module` and `localisation` (a `backward` one only when run L found a module, and then its
    cause is `forward`). Never raises: the verdict is already decided."""
    divergence = comparison.get("first_divergence")
    if (
        comparison.get("basis") != "bitwise"
        or not divergence
        or divergence.get("cause") not in LOCALISED_CAUSES
        or state.strict_stop
    ):
        return
    step, rank = int(divergence["step"]), int(divergence.get("rank") or 0)
    name = RUN_NAME if all(r.name != RUN_NAME for r in state.records) else SPARE_RUN_NAME
    found: dict[str, Any]
    try:
        spec = training_run.build_spec(config, launcher, name, "deterministic", max_steps=step)
        spec.env[probe.ENV_LOCALISE_STEP] = str(step)
        record = execute(spec)
    except GateError as error:  # a signal too: the verdict is decided, the gate reports it
        found = {"module": None, "localisation": _failed(name, one_line(error.message))}
    except Exception as error:  # the verdict is already decided: nothing here may change it
        note = f"run {name} could not run: {type(error).__name__}: {one_line(error)}"
        found = {"module": None, "localisation": _failed(name, note)}
    else:
        record.purpose = PURPOSE
        state.records.append(record)
        found = outcome(record, step, rank)
    if divergence["cause"] == "backward":
        if found["localisation"]["status"] != "found":
            return  # every module reproduced its output: the backward pass it stays
        divergence.pop("gradients", None)
        divergence["cause"] = "forward"
    divergence["module"] = found["module"]
    divergence["localisation"] = found["localisation"]


def outcome(record: training_run.RunRecord, step: int, rank: int) -> dict[str, Any]:
    """`module` and `localisation` from what run `record` left for `rank`."""
    result = probe.read_json(record.run_dir, probe.LOCALISE_FILE, rank)
    if not _readable(result, step):
        return {"module": None, "localisation": _failed(record.name, _missing(record, step, rank))}
    checked = result["checked"]
    where = f"run {record.name} ran the {checked} module calls of step {step}"
    where += f" on rank {rank}" if rank else ""
    module = result.get("module")
    if isinstance(module, str):
        kind = result.get("class") or "module"
        if module:
            note = f"{where} again from the same inputs: `{module}` ({kind}) is the first whose" \
                   " output changed"
        else:  # the outermost module itself, outside all its submodules
            module = str(kind)
            note = f"{where} again from the same inputs: the outermost module ({kind}) is the" \
                   " first whose output changed, in its own code: its submodules reproduced theirs"
        status = "found"
    else:
        note = f"{where} again from the same inputs and every one reproduced its output: the" \
               " difference comes from code outside the modules (the loss computed in the" \
               " training loop, say)"
        status = "not_found"
    errors = [e for e in result.get("errors") or [] if isinstance(e, str)]
    if errors:
        note += f"; {len(errors)} not checked, e.g. {errors[0]}"
    return {"module": module if status == "found" else None,
            "localisation": {"status": status, "run": record.name, "note": note}}


def _readable(result: Any, step: int) -> bool:
    return (
        isinstance(result, dict)
        and result.get("step") == step
        and isinstance(result.get("checked"), int)
        and isinstance(result.get("module"), (str, type(None)))
    )


def _missing(record: training_run.RunRecord, step: int, rank: int) -> str:
    """Why run `record` left no usable localise file for `rank`."""
    if record.timed_out:
        return f"run {record.name} timed out after {record.wall_seconds:.1f} s" \
               f" (log: {record.log_path})"
    if not record.ended_cleanly:
        return f"run {record.name} exited with code {record.exit_code} before step {step} was" \
               f" checked (log: {record.log_path})"
    file = probe.rank_file(probe.LOCALISE_FILE, rank)
    return f"run {record.name} wrote no usable {file}: no module was called under grad mode" \
           f" at step {step}"


def _failed(run: str, note: str) -> dict[str, str]:
    return {"status": "failed", "run": run, "note": note}
