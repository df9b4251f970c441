"""Which state a resume did not restore, from the state records of runs A and R.

With `resume` set, the probe records for every step the state it begins with
(`resume_state.jsonl`): digests of the parameters, buffers and optimizer state, the random
generators' states, each parameter group's hyperparameters and the gradient scaler's scale. At
the first step after the resume point where anything differs between A and R (on any rank), the
missing state is the first of PRECEDENCE that differs there; the input batch's digest of the
trajectory stands for the data order. Nothing differs: `unknown`.
"""

from __future__ import annotations

from typing import Any, TypedDict

from repro_gate.errors import StrEnum

Records = dict[int, list[dict[str, Any]]]  # by rank, in step order
StepTable = dict[int, dict[int, tuple[dict[str, Any], Any]]]  # step -> rank -> (state, inputs)


class Missing(StrEnum):
    PARAMETERS = "parameters"
    BUFFERS = "buffers"
    RNG = "rng"
    DATA_ORDER = "data_order"
    LR_SCHEDULE = "lr_schedule"
    GRAD_SCALER = "grad_scaler"
    OPTIMIZER_STATE = "optimizer_state"
    UNKNOWN = "unknown"


PRECEDENCE = list(Missing)
GENERATORS = ("torch", "cuda", "numpy", "random")


class MissingState(TypedDict):
    """`comparison.resume.missing_state`."""

    kind: str
    generator: str | None  # rng only: the generator not restored


SENTENCES: dict[str, str] = {
    Missing.PARAMETERS: "the model's parameters were not restored: save model.state_dict() in the"
                        " checkpoint and load it with model.load_state_dict() before training"
                        " resumes",
    Missing.BUFFERS: "the model's buffers (running statistics such as BatchNorm's) were not"
                     " restored: save the whole model.state_dict(), not only the parameters, and"
                     " load it with strict=True",
    "rng/torch": "the torch random generator was not restored: save torch.get_rng_state() in the"
                 " checkpoint and restore it with torch.set_rng_state(); it also decides a"
                 " shuffling sampler's data order",
    "rng/cuda": "the CUDA random generators were not restored: save"
                " torch.cuda.get_rng_state_all() in the checkpoint and restore them with"
                " torch.cuda.set_rng_state_all()",
    "rng/numpy": "the numpy random generator was not restored: save np.random.get_state() in the"
                 " checkpoint and restore it with np.random.set_state()",
    "rng/random": "Python's random generator was not restored: save random.getstate() in the"
                  " checkpoint and restore it with random.setstate()",
    Missing.DATA_ORDER: "the data order was not restored: the resumed run sees other batches;"
                        " save the epoch, the batches already consumed and the sampler's"
                        " generator state, and continue from that position on resume",
    Missing.LR_SCHEDULE: "the learning-rate schedule was not restored: save"
                         " scheduler.state_dict() in the checkpoint and load it with"
                         " scheduler.load_state_dict() after creating the scheduler",
    Missing.GRAD_SCALER: "the gradient scaler was not restored: save scaler.state_dict() in the"
                         " checkpoint and load it with scaler.load_state_dict()",
    Missing.OPTIMIZER_STATE: "the optimizer's state (moments, step counts) was not restored: save"
                             " optimizer.state_dict() in the checkpoint and load it with"
                             " optimizer.load_state_dict()",
    Missing.UNKNOWN: "every state the probe records was restored, yet the resumed run differs:"
                     " look for state it does not record (a custom sampler, a global counter,"
                     " a file the training reads or appends to)",
}


def sentence(missing: MissingState) -> str:
    """The one sentence that names the missing state and the fix it points to."""
    if missing["kind"] == Missing.RNG:
        return SENTENCES[f"rng/{missing['generator']}"]
    return SENTENCES[missing["kind"]]


def decide(states_a: Records, states_r: Records, trajectory_a: Records, trajectory_r: Records,
           resume_step: int) -> MissingState:
    """The state not restored: the first of PRECEDENCE that differs at the first step after
    `resume_step` where anything recorded differs, on any rank."""
    steps_a = _by_step(states_a, trajectory_a)
    steps_r = _by_step(states_r, trajectory_r)
    common = sorted(s for s in steps_a if s in steps_r)
    # What already differed at the resume point's own step is not the resume's doing: a
    # generator the training never seeds (nor uses) differs between any two processes.
    before = [s for s in common if s <= resume_step]
    already = [_key(d) for d in _at(before[-1], steps_a, steps_r)] if before else []
    for step in (s for s in common if s > resume_step):
        found = [d for d in _at(step, steps_a, steps_r) if _key(d) not in already]
        if found:
            return min(found, key=_order)
    return {"kind": Missing.UNKNOWN, "generator": None}


def _at(step: int, steps_a: StepTable, steps_r: StepTable) -> list[MissingState]:
    """Every state that differs at `step`, on any rank both runs recorded."""
    return [difference
            for rank, (state_a, batch_a) in steps_a[step].items()
            if rank in steps_r[step]
            for difference in _differences(state_a, batch_a, *steps_r[step][rank])]


def _key(missing: MissingState) -> tuple[str, str | None]:
    return missing["kind"], missing["generator"]


def _by_step(states: Records, trajectory: Records) -> StepTable:
    """step -> rank -> (state record, input digest); a step recorded twice keeps its last."""
    inputs = {(rank, r.get("step")): r.get("inputs") for rank, steps in trajectory.items()
              for r in steps}
    table: StepTable = {}
    for rank, records in states.items():
        for record in records:
            step = record.get("step")
            if isinstance(step, int):
                table.setdefault(step, {})[rank] = (record, inputs.get((rank, step)))
    return table


def _differences(a: dict[str, Any], inputs_a: Any, r: dict[str, Any],
                 inputs_r: Any) -> list[MissingState]:
    found: list[MissingState] = []
    for key, kind in (("params", Missing.PARAMETERS), ("buffers", Missing.BUFFERS)):
        if a.get(key) != r.get(key):
            found.append({"kind": kind, "generator": None})
    rng_a, rng_r = a.get("rng") or {}, r.get("rng") or {}
    found += [{"kind": Missing.RNG, "generator": name}
              for name in GENERATORS if rng_a.get(name) != rng_r.get(name)]
    if inputs_a is not None and inputs_r is not None and inputs_a != inputs_r:
        found.append({"kind": Missing.DATA_ORDER, "generator": None})
    for key, kind in (("hyper", Missing.LR_SCHEDULE), ("grad_scale", Missing.GRAD_SCALER),
                      ("optimizer_state", Missing.OPTIMIZER_STATE)):
        if a.get(key) != r.get(key):
            found.append({"kind": kind, "generator": None})
    return found


def _order(missing: MissingState) -> tuple[int, int]:
    generator = missing["generator"]
    return (PRECEDENCE.index(Missing(missing["kind"])),
            GENERATORS.index(generator) if generator in GENERATORS else 0)
