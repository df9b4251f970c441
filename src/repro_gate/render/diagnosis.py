"""The first divergence said so a person can act: one sentence naming the cause and its fix.

Read from `comparison.first_divergence` (the manifest schema's `$defs.first_divergence`). A
divergence without `cause` (written before causes were classified) reads as it always has.
The reading is tolerant: a field of the wrong type reads as absent, never raises.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from repro_gate.workspace import repository_path, workspace_root

MAX_NAMES = 5  # parameter names in a sentence before "and N more"

# Why each cause happens and where to look: the part of the sentence a person acts on.
INITIALIZATION_FIX = (
    "the model is initialised from a source the gate cannot seed (os.urandom, time);"
    " draw it from torch's seeded RNG instead"
)
INPUT_FIX = (
    "data order or augmentation is not seeded (DataLoader workers, directory listing, unseeded RNG)"
)
MODULE_FIX = "look in its forward() for unseeded randomness or a nondeterministic op"
NOT_FOUND_FIX = (
    "no module's output changed when re-executed: look at the training loop's code between the"
    " model and the loss"
)
UNLOCATED_FIX = "look for unseeded randomness in the model's forward() or the loss"
OP_FIX = "it has no deterministic kernel: replace it with a deterministic alternative"
BACKWARD_FIX = (
    "look for a custom autograd backward, or a kernel that torch.use_deterministic_algorithms(True)"
    " does not cover"
)
OPTIMIZER_FIX = "look for unseeded randomness or a nondeterministic kernel in the optimizer's step"
HASH_SEED_FIX = (
    "if the training numbers or orders anything by iterating a set of strings (a vocabulary,"
    " a list of files), iterate sorted, not a set"
)
# The causes a hash seed can be behind: what is built before the model computes anything.
HASH_SEED_CAUSES = ("initialization", "input", "unknown", None)

# The call that seeds each generator, named in the unseeded sentence.
SEED_CALLS = {"torch": "torch.manual_seed(0)", "numpy": "numpy.random.seed(0)"}

# Short labels for titles and table cells.
LABELS = {
    "initialization": "initial parameters differ",
    "input": "input batch differs",
    "forward": "forward pass diverges",
    "backward": "backward pass diverges",
    "optimizer": "optimizer update diverges",
    "buffers": "buffers differ",
    "unknown": "cause unknown",
}


def explain(divergence: Mapping[str, Any], multi_rank: bool) -> str:
    """One sentence: where runs A and B part, why, and the fix that points to; when the runs
    had different hash seeds and the cause allows it, that too, with its fix."""
    return _explain(divergence, multi_rank) + _hash_seed_clause(divergence)


def _explain(divergence: Mapping[str, Any], multi_rank: bool) -> str:
    cause = divergence.get("cause")
    if unseeded(divergence):
        return f"{_where(divergence, multi_rank)}: {unseeded(divergence)}"
    if cause == "initialization":
        return _initialization(divergence, multi_rank)
    if cause == "input":
        return _input(divergence, multi_rank)
    step = divergence.get("step", "?")
    lead = f"{_rank_prefix(divergence, multi_rank)}runs {_runs(divergence)} diverge at step {step}"
    if cause == "forward":
        return f"{lead} in the forward pass: {_forward(divergence)}"
    if cause == "backward":
        return f"{lead} in the backward pass: {_backward(divergence)}"
    if cause == "optimizer":
        return f"{lead} in the optimizer step: {_optimizer(divergence)}"
    if cause == "buffers":
        return f"{lead} in the model's buffers: {_buffers(divergence)}"
    if cause == "unknown":
        return f"{lead}: {_parameters(divergence)}; cause unknown: {_missing(divergence)}"
    return f"{lead}: {_parameters(divergence)}"


def _buffers(divergence: Mapping[str, Any]) -> str:
    """The buffers that differ while parameters and loss agree, and where to look."""
    names = _names(divergence.get("buffers"))
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return (f"{shown or 'a buffer'} differ while the parameters and the loss agree; running"
            " statistics (BatchNorm's) that a checkpoint leaves out or a resume does not restore"
            " look like this")


def _hash_seed_clause(divergence: Mapping[str, Any]) -> str:
    """`; runs A and B had different hash seeds (PYTHONHASHSEED 0 and 1): …`, or empty; empty
    too when the training left torch unseeded, a cause already certain."""
    seeds = hash_seeds_text(divergence)
    if not seeds or divergence.get("cause") not in HASH_SEED_CAUSES or unseeded(divergence):
        return ""
    return (f"; runs {_runs(divergence)} had different hash seeds (PYTHONHASHSEED {seeds}):"
            f" {HASH_SEED_FIX}")


def hash_seeds_text(divergence: Mapping[str, Any]) -> str:
    """`0 and 1`: the hash seeds of the divergent runs, in their order; empty without them."""
    seeds = _mapping(divergence.get("hash_seeds"))
    return " and ".join(str(seeds[run]) for run in _names(divergence.get("runs"))
                        if run in seeds)


def unseeded(divergence: Mapping[str, Any]) -> str:
    """What the training left unseeded and the line to add, anchored where its first parameter
    was created: `torch was never seeded: add `torch.manual_seed(0)` before train.py:12, where
    the first parameter is created`. Empty unless the divergence carries `unseeded`."""
    anchor = _mapping(divergence.get("unseeded"))
    generators = [g for g in _names(anchor.get("generators")) if g in SEED_CALLS]
    if not generators:
        return ""
    calls = " and ".join(f"`{SEED_CALLS[g]}`" for g in generators)
    where = op_location(anchor)
    before = (f"before {where}, where the first parameter is created" if where
              else "before the model is built")
    if anchor.get("seeded_late") is True:
        return (f"torch is seeded only after the first parameter was created: move {calls}"
                f" {before}")
    verb = "was" if len(generators) == 1 else "were"
    return f"{' and '.join(generators)} {verb} never seeded: add {calls} {before}"


def _where(divergence: Mapping[str, Any], multi_rank: bool) -> str:
    """Where runs A and B part, in a few words: the lead of the unseeded sentence."""
    runs = _runs(divergence)
    if divergence.get("cause") == "initialization":
        whose = f"rank {divergence['rank']}'s" if _ranked(divergence, multi_rank) else "the"
        return f"{whose} initial parameters differ between runs {runs}"
    return f"{_rank_prefix(divergence, multi_rank)}runs {runs} diverge at step" \
        f" {divergence.get('step', '?')}"


def headline(divergence: Mapping[str, Any], multi_rank: bool) -> str:
    """A few words for a title or a table cell: `forward pass diverges at step 5 (module body.1)`.

    Empty for a divergence without a cause: the caller keeps its own wording.
    """
    cause = divergence.get("cause")
    if cause not in LABELS:
        return ""
    text = LABELS[str(cause)]
    if cause != "initialization":
        text += f" at step {divergence.get('step', '?')}"
    if multi_rank and _is_int(divergence.get("rank")):
        text += f" on rank {divergence['rank']}"
    detail = _headline_detail(divergence)
    return f"{text} ({detail})" if detail else text


def facts(divergence: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The evidence behind the sentence, as (label, text) pairs; empty without a cause."""
    if divergence.get("cause") not in LABELS:
        return []
    found = [("cause", str(divergence["cause"]))]
    if _names(divergence.get("initial_parameters")):
        found.append(("initial parameters", names_text(divergence.get("initial_parameters"))))
    if isinstance(divergence.get("module"), str):
        found.append(("module", divergence["module"]))
    if _names(divergence.get("gradients")):
        found.append(("gradients differ", names_text(divergence.get("gradients"))))
    op = _mapping(divergence.get("op"))
    if op.get("op"):
        found.append(("nondeterministic op", f"{op['op']}{_op_where(op)}"))
    if hash_seeds_text(divergence):
        found.append(("hash seeds", hash_seeds_text(divergence)))
    localisation = _mapping(divergence.get("localisation"))
    if localisation.get("status"):
        note = localisation.get("note")
        run = f" (run {localisation['run']})" if localisation.get("run") else ""
        text = str(localisation["status"]).replace("_", " ") + run
        found.append(("localisation", text + (f": {note}" if note else "")))
    return found


def names_text(names: Any, limit: int = MAX_NAMES) -> str:
    """`a, b, c, d, e and 3 more`; empty without names."""
    shown = _names(names)
    text = ", ".join(shown[:limit])
    return text + (f" and {len(shown) - limit} more" if len(shown) > limit else "")


def op_location(op: Mapping[str, Any]) -> str:
    """`train.py:42`: relative to the repository root when the file is inside it."""
    file = op.get("file")
    if not isinstance(file, str) or not file:
        return ""
    where = repository_path(file, workspace_root()) or file
    return f"{where}:{op['line']}" if _is_int(op.get("line")) else where


def _initialization(divergence: Mapping[str, Any], multi_rank: bool) -> str:
    whose = f"rank {divergence['rank']}'s" if _ranked(divergence, multi_rank) else "the"
    names = names_text(divergence.get("initial_parameters"))
    which = f" ({names})" if names else ""
    return (f"{whose} initial parameters differ between runs {_runs(divergence)}{which}:"
            f" {INITIALIZATION_FIX}")


def _input(divergence: Mapping[str, Any], multi_rank: bool) -> str:
    step, runs = divergence.get("step", "?"), _runs(divergence)
    if _ranked(divergence, multi_rank):
        whose = f"rank {divergence['rank']}'s"
        return f"{whose} input differs at step {step} (runs {runs}): {INPUT_FIX}"
    return f"at step {step} the input batch differs (runs {runs}): {INPUT_FIX}"


def _forward(divergence: Mapping[str, Any]) -> str:
    module = divergence.get("module")
    if isinstance(module, str) and module:
        return (f"module `{module}` (its inputs are equal, its output differs);"
                f" {MODULE_FIX}{_op_clause(divergence)}")
    equal_inputs = "the loss differs while the model's inputs are equal"
    localisation = _mapping(divergence.get("localisation"))
    status = localisation.get("status")
    if status == "not_found":
        return f"{equal_inputs}; {NOT_FOUND_FIX}{_op_clause(divergence)}"
    if status == "failed":
        note = localisation.get("note")
        why = f": {note}" if isinstance(note, str) and note else ""
        return (f"{equal_inputs}; the run that locates the module failed{why}"
                f"{_op_clause(divergence)}")
    return f"{equal_inputs}; {UNLOCATED_FIX}{_op_clause(divergence)}"


def _backward(divergence: Mapping[str, Any]) -> str:
    gradients = names_text(divergence.get("gradients")) or "some parameters"
    text = f"the gradients of {gradients} differ while the loss is equal"
    op = _mapping(divergence.get("op"))
    if op.get("op"):
        return f"{text}; nondeterministic op `{op['op']}`{_op_where(op)} ran in this step: {OP_FIX}"
    return f"{text}; {BACKWARD_FIX}"


def _optimizer(divergence: Mapping[str, Any]) -> str:
    names = names_text(divergence.get("parameters"))
    of = f" of {names}" if names else ""
    return (f"the optimizer's update{of} differs while the gradients are equal;"
            f" {OPTIMIZER_FIX}{_op_clause(divergence)}")


def _missing(divergence: Mapping[str, Any]) -> str:
    """What the probe did not record, which kept the cause from being classified."""
    if divergence.get("loss_differs") is None:
        return "no loss was recorded, so the forward and backward passes cannot be told apart"
    if not _names(divergence.get("gradients")):
        return "no gradients were recorded (no optimizer step was seen)"
    return "the step's records do not place it"


def _parameters(divergence: Mapping[str, Any]) -> str:
    """Today's wording: the parameters that differ after the step, or the loss."""
    names = _names(divergence.get("parameters"))
    text = ", ".join(names[:MAX_NAMES]) or "the loss"
    return text + (f" and {len(names) - MAX_NAMES} more" if len(names) > MAX_NAMES else "")


def _op_clause(divergence: Mapping[str, Any]) -> str:
    op = _mapping(divergence.get("op"))
    if not op.get("op"):
        return ""
    return f"; nondeterministic op `{op['op']}`{_op_where(op)} ran in this step"


def _op_where(op: Mapping[str, Any]) -> str:
    where = op_location(op)
    return f" at {where}" if where else ""


def _headline_detail(divergence: Mapping[str, Any]) -> str:
    module = divergence.get("module")
    if divergence.get("cause") == "forward" and isinstance(module, str) and module:
        return f"module {module}"
    if divergence.get("cause") == "backward":
        op = _mapping(divergence.get("op"))
        if op.get("op"):
            return f"op {op['op']}"
        gradients = _names(divergence.get("gradients"))
        more = f" +{len(gradients) - 1} more" if len(gradients) > 1 else ""
        return f"gradients of {gradients[0]}{more}" if gradients else ""
    return ""


def _rank_prefix(divergence: Mapping[str, Any], multi_rank: bool) -> str:
    return f"rank {divergence['rank']}: " if _ranked(divergence, multi_rank) else ""


def _ranked(divergence: Mapping[str, Any], multi_rank: bool) -> bool:
    return multi_rank and _is_int(divergence.get("rank"))


def _runs(divergence: Mapping[str, Any]) -> str:
    runs = _names(divergence.get("runs"))
    return " and ".join(runs) if runs else "A and B"


def _names(value: Any) -> list[str]:
    return [str(v) for v in value] if isinstance(value, list) else []


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
