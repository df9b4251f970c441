"""The golden document: a passing run's numbers, compact enough to review and commit.

Per step, one row `[step, loss bits, loss value, inputs, gradients, parameters, buffers]` (each
of the last four one digest combining the probe's digests; the buffers' by value in model order,
not by name, so a rename leaves it as it was; null without buffers; format 1 rows end at
`parameters`, and are read as they are); per tensor digests at the first and last
step only (enough to name the parameters); each artifact's sha256 with per-tensor digests and
summaries (shape, dtype, norm, max abs) for comparisons under a tolerance. `software` is what
the run ran with, `machine_class` what it ran on (`machine_class.py`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro_gate import validation
from repro_gate.errors import ErrorKind, GateError
from repro_gate.golden.machine_class import machine_class
from repro_gate.manifest.store import write_text_atomic

FORMAT = 2  # the golden document's version (`format`); schemas/golden.schema.json
DIGEST_CHARS = 8  # hex characters of a step's combined digest (32 bits)
LOSS_DIGITS = 9  # significant digits of the loss value (its bits are exact)
SCHEMA = "golden"
# A row of `steps`: its fields, in order.
STEP, LOSS, VALUE, INPUTS, GRADIENTS, PARAMETERS, BUFFERS = range(7)
Row = list[Any]


@dataclass
class RunData:
    """What a golden document is made of: one passing run and its environment."""

    trajectory: list[dict[str, Any]]
    fingerprint: dict[str, Any]
    artifacts: list[tuple[str, Path]]  # (path relative to the run, the file)
    gate: str = ""


def combined(value: Any) -> str | None:
    """One digest for a record of the probe (a digest, or a name -> digest mapping)."""
    if value is None:
        return None
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


def step_row(record: dict[str, Any]) -> Row:
    """The golden row of one step the probe recorded."""
    loss = record.get("loss")
    value = None
    if isinstance(loss, str):
        exact = float.fromhex(loss)
        # An overflowed loss (a gradient scaler's skipped step) keeps its bits; JSON has no inf.
        value = float(f"{exact:.{LOSS_DIGITS}g}") if math.isfinite(exact) else None
        loss = re.sub(r"0+p", "p", loss)  # a float32's trailing zeros say nothing
    buffers = record.get("buffers")
    by_value = list(buffers.values()) if isinstance(buffers, dict) and buffers else None
    return [int(record["step"]), loss, value, combined(record.get("inputs")),
            combined(record.get("grads")), combined(record.get("params")), combined(by_value)]


def tensors_at(record: dict[str, Any]) -> dict[str, Any]:
    """The per-tensor digests of one step (the first step holds the initial parameters too)."""
    chosen = {"step": int(record["step"]), "parameters": record.get("params") or {},
              "gradients": record.get("grads") or {}}
    if isinstance(record.get("init"), dict):
        chosen["initial"] = record["init"]
    return chosen


def software(fingerprint: dict[str, Any]) -> dict[str, str | None]:
    """What the run ran with, as one flat mapping of text (None: not known); `seeding` is read
    from the training, and compared as its code (`attribution.TRAINING_FACTS`)."""
    env = fingerprint.get("env") or {}
    image = env.get("image") or {}
    digests = image.get("repo_digests") or []
    locks = [f"{lock['path']}:{lock['sha256'][:16]}" for lock in env.get("lockfiles") or []]
    hardware = fingerprint.get("hardware") or {}
    return {
        "image": digests[0] if digests else image.get("id"),
        "python": env.get("python"),
        "torch": env.get("torch"),
        "cuda": env.get("cuda_build"),
        "cudnn": None if env.get("cudnn") is None else str(env.get("cudnn")),
        "driver": hardware.get("driver_version"),
        "lock": ", ".join(locks) or None,
        "packages": (env.get("packages") or {}).get("sha256"),
        "commit": (fingerprint.get("code") or {}).get("commit"),
        "seeding": seeding_text(fingerprint),
    }


def seeding_text(fingerprint: dict[str, Any]) -> str | None:
    """How the run was seeded: the gate's seed, else the training's first torch seeding call."""
    seeding = (fingerprint.get("random") or {}).get("seeding") or {}
    if seeding.get("gate_seed") is not None:
        return f"gate seed {seeding['gate_seed']}"
    calls = [c for c in seeding.get("training") or [] if c.get("generator") == "torch"]
    if not calls:
        return "unseeded"
    call = calls[0]
    return f"{call.get('call')}({call.get('seed')}) at {call.get('file')}:{call.get('line')}"


def build(run: RunData, blessed_at: str) -> dict[str, Any]:
    """The golden document of a passing run."""
    from repro_gate.golden.summaries import artifact_entry  # numpy: only when blessing

    trajectory = run.trajectory
    return {
        "format": FORMAT,
        "machine_class": machine_class(run.fingerprint),
        "software": software(run.fingerprint),
        "gate": run.gate,
        "blessed_at": blessed_at,
        "steps": [step_row(record) for record in trajectory],
        "tensors": {"first": tensors_at(trajectory[0]) if trajectory else None,
                    "last": tensors_at(trajectory[-1]) if trajectory else None},
        "artifacts": [artifact_entry(rel, path) for rel, path in run.artifacts],
    }


def read(path: Path) -> dict[str, Any]:
    """The golden document at `path`, validated; every problem is a one-line GateError."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise GateError(f"golden file {path}: cannot be read: {error}",
                        kind=ErrorKind.GOLDEN) from None
    problems = validation.errors(SCHEMA, document)
    if problems:
        raise GateError(f"golden file {path}: not a golden trajectory: {problems[0]}",
                        kind=ErrorKind.GOLDEN)
    return dict(document)


def parse(text: str) -> dict[str, Any] | None:
    """A golden document from text (the base branch's version); None when it is not one."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return None
    return dict(document) if not validation.errors(SCHEMA, document) else None


def write(document: dict[str, Any], path: Path) -> None:
    """Validate, then write atomically (the folders made as needed)."""
    problems = validation.errors(SCHEMA, document)
    if problems:
        raise GateError(f"golden document not written: {problems[0]}", kind=ErrorKind.GOLDEN)
    write_text_atomic(path, dumps(document))


def dumps(document: dict[str, Any]) -> str:
    """The document as text: one line per step, so that a review's diff shows the steps."""
    placeholder = "\u0000steps"
    text = json.dumps({**document, "steps": placeholder}, indent=1, allow_nan=False)
    rows = ",\n".join("  " + json.dumps(row, separators=(",", ":"), allow_nan=False)
                      for row in document["steps"])
    steps = f"[\n{rows}\n ]" if rows else "[]"
    return text.replace(json.dumps(placeholder), steps, 1) + "\n"
