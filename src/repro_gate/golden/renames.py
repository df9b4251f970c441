"""Run A under the golden file's tensor names, when names are all that tell tensors apart.

Renaming a module (`self.fc` to `self.proj`) renames its tensors, and compared by name every
step's digests would differ. So the tensors whose names are on one side only are paired by
value: in order, each of run A's is paired with the first waiting one of the golden file's
that has the same digest (and, in a checkpoint, the same shape and dtype); position breaks ties
between equal values, such as zeroed biases. The parameters are paired by their digests at the
first step; run A's per-step digests are then combined again under the golden names. A
checkpoint's tensors are renamed the same way (a name ending in a paired parameter's name),
then its other tensors on one side only (buffers, say) are paired by value in turn. A tensor
paired with none keeps its name, so a real change still shows at the step it starts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from repro_gate.golden.document import step_row, tensors_at

# The records of a probe step that hold one digest per tensor name.
NAMED_RECORDS = ("params", "grads", "init")
# What a tensor's value is known by: its digest, shape and dtype (the last two where known).
Value = tuple[str, tuple[int, ...] | None, str | None]


@dataclass(frozen=True)
class Tensor:
    """A tensor as it is paired: its name, and what its value is known by."""

    name: str
    digest: str
    shape: tuple[int, ...] | None = None  # known for a checkpoint's tensors only
    dtype: str | None = None


@dataclass(frozen=True)
class Rename:
    golden: str  # the name in the golden file
    run: str  # run A's name for the same value


@dataclass(frozen=True)
class RunView:
    """Run A's golden document with its tensors under the golden file's names."""

    document: dict[str, Any]
    renamed: list[Rename]
    # Checkpoints whose tensors were renamed: their sha256 differs by the names, so their
    # tensors decide.
    renamed_artifacts: frozenset[str]


def pair(golden: Sequence[Tensor], run: Sequence[Tensor]) -> list[Rename]:
    """Each of run A's tensors whose name the golden file lacks, with the first waiting golden
    tensor (one whose name run A lacks) of the same value, in order."""
    golden_names = {tensor.name for tensor in golden}
    run_names = {tensor.name for tensor in run}
    waiting: dict[Value, list[str]] = {}
    for tensor in golden:
        if tensor.name not in run_names:
            waiting.setdefault(_value(tensor), []).append(tensor.name)
    pairs: list[Rename] = []
    for tensor in run:
        names = waiting.get(_value(tensor)) if tensor.name not in golden_names else None
        if names:
            pairs.append(Rename(golden=names.pop(0), run=tensor.name))
    return pairs


def _value(tensor: Tensor) -> Value:
    return tensor.digest, tensor.shape, tensor.dtype


def under_golden_names(golden: Mapping[str, Any], candidate: dict[str, Any],
                       trajectory: Sequence[Mapping[str, Any]]) -> RunView:
    """`candidate` (run A made into a golden document from `trajectory`, its probe records)
    with its tensors under the golden file's names; itself when no name differs."""
    parameters = pair(*first_step_tensors(golden, candidate))
    names = {rename.run: rename.golden for rename in parameters}
    document = dict(candidate)
    if names and trajectory:
        records = [renamed_record(record, names) for record in trajectory]
        document["steps"] = [step_row(record) for record in records]
        document["tensors"] = {"first": tensors_at(records[0]), "last": tensors_at(records[-1])}
    document["artifacts"], in_checkpoints, paths = renamed_artifacts(
        golden["artifacts"], candidate["artifacts"], names)
    renamed = parameters + [rename for rename in in_checkpoints if rename not in parameters]
    return RunView(document, renamed, paths)


def first_step_tensors(golden: Mapping[str, Any], candidate: Mapping[str, Any]
                       ) -> tuple[list[Tensor], list[Tensor]]:
    """The golden file's and run A's parameters at the first step, by the same record: the
    initial parameters when both have them, else the parameters after the first update."""
    firsts = [(document.get("tensors") or {}).get("first") or {}
              for document in (golden, candidate)]
    kind = "initial" if all(first.get("initial") for first in firsts) else "parameters"
    golden_first, run_first = (
        [Tensor(name, digest) for name, digest in (first.get(kind) or {}).items()
         if isinstance(digest, str)] for first in firsts)
    return golden_first, run_first


def renamed_artifacts(golden: list[dict[str, Any]], run: list[dict[str, Any]],
                      parameters: Mapping[str, str]
                      ) -> tuple[list[dict[str, Any]], list[Rename], frozenset[str]]:
    """Run A's artifact entries with each checkpoint's tensors under the golden names (of the
    golden file's checkpoint at the same path), the pairs found by value, and the paths of the
    checkpoints renamed."""
    by_path = {entry["path"]: entry for entry in golden}
    entries: list[dict[str, Any]] = []
    found: list[Rename] = []
    paths: set[str] = set()
    for entry in run:
        expected = by_path.get(entry["path"])
        if expected is None or "tensors" not in entry or "tensors" not in expected:
            entries.append(entry)
            continue
        tensors, by_value = renamed_tensors(expected["tensors"], entry["tensors"], parameters)
        found += [rename for rename in by_value if rename not in found]
        if tensors != entry["tensors"]:
            paths.add(entry["path"])
        entries.append({**entry, "tensors": tensors})
    return entries, found, frozenset(paths)


def renamed_record(record: Mapping[str, Any], names: Mapping[str, str]) -> dict[str, Any]:
    """A probe record with its per-tensor digests under the golden names."""
    renamed = dict(record)
    for key in NAMED_RECORDS:
        digests = record.get(key)
        if isinstance(digests, dict):
            renamed[key] = {names.get(name, name): digest for name, digest in digests.items()}
    return renamed


def renamed_tensors(golden: list[dict[str, Any]], run: list[dict[str, Any]],
                    parameters: Mapping[str, str]) -> tuple[list[dict[str, Any]], list[Rename]]:
    """A checkpoint's tensor summaries under the golden names: those named after a paired
    parameter (`model.proj.weight` for `proj.weight`) renamed as it is, then the others on one
    side only paired by value; and the pairs found by value."""
    run_names = {summary["name"] for summary in run}
    by_parameter: dict[str, str] = {}
    for summary in run:
        new = with_parameter_renamed(summary["name"], parameters)
        if new != summary["name"] and new not in run_names:
            by_parameter[summary["name"]] = new
    mapped = [{**s, "name": by_parameter.get(s["name"], s["name"])} for s in run]
    found = pair([as_tensor(summary) for summary in golden if summary.get("digest")],
                 [as_tensor(summary) for summary in mapped if summary.get("digest")])
    by_value = {rename.run: rename.golden for rename in found}
    return [{**s, "name": by_value.get(s["name"], s["name"])} for s in mapped], found


def with_parameter_renamed(name: str, parameters: Mapping[str, str]) -> str:
    """`name` with its longest ending of whole dotted parts that is a run A parameter's name
    replaced by that parameter's golden name."""
    parts = name.split(".")
    for start in range(len(parts)):
        ending = ".".join(parts[start:])
        if ending in parameters:
            return ".".join([*parts[:start], parameters[ending]])
    return name


def as_tensor(summary: Mapping[str, Any]) -> Tensor:
    return Tensor(summary["name"], summary["digest"], tuple(summary["shape"]), summary["dtype"])
