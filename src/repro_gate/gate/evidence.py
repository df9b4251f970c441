"""What the gate saw happen: whether the probe loaded in every run, and whether it saw steps.

The probe confirms it loaded with rank 0's status file, written by the run's first Python process
(the owner) from its start and taken over by the process that steps as rank 0; every other rank
that steps writes its own. A run without it was not observed, and no determinism was applied to
it. Its verdict can then rest on the compared artifacts only, and says so everywhere it is shown;
with no artifacts compared it is the error `probe_not_loaded`, naming the likely reason and the
fix. A probe that loaded but saw no optimizer step also leaves the verdict to the artifacts.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from repro_gate.errors import ErrorKind, GateError
from repro_gate.gate.training_run import RunRecord
from repro_gate.gate.verdict import Reason, reason
from repro_gate.render.observed import limitation

PYTHON_NAME = re.compile(r"(python|pypy)[0-9.]*(\.exe)?", re.IGNORECASE)
CLEARED_PATH = "PYTHONPATH="
# Interpreter flags that keep the probe out: why, and what to do instead.
SKIPPING_FLAGS = {
    "I": "python -I ignores PYTHONPATH, which loads the probe; drop -I (-P keeps the script's"
         " directory off sys.path)",
    "E": "python -E ignores PYTHONPATH, which loads the probe; drop -E",
    "S": "python -S skips sitecustomize, which loads the probe; drop -S",
}
CLEARS_PATH = (
    "the command clears or replaces PYTHONPATH, which loads the probe;"
    " extend it instead (PYTHONPATH=src:$PYTHONPATH)"
)
NOT_PYTHON = (
    "{program} is not Python and started no Python that loaded the probe; run the training"
    " with python, or have {program} start it without -I/-S/-E and with the gate's PYTHONPATH"
)
UNKNOWN = (
    "the interpreter did not import sitecustomize from PYTHONPATH (an embedded or frozen"
    " interpreter, -I/-S/-E, or a replaced PYTHONPATH); run the training with a plain python"
)


@dataclass(frozen=True)
class Evidence:
    """What the compared runs observed."""

    probe_loaded: bool  # in the first process of every compared run
    steps_observed: bool  # an optimizer step was recorded in some compared run
    not_loaded: str | None = None  # "run A: <reason>; <fix>" when the probe did not load

    def to_manifest(self) -> dict[str, Any]:
        """The manifest's `evidence`."""
        return {"probe_loaded": self.probe_loaded, "steps_observed": self.steps_observed}


def gather(command: str | Sequence[str] | None, records: list[RunRecord]) -> Evidence:
    """The evidence of the compared runs of a gate that ran `command`."""
    missing = [r.name for r in records if not isinstance(r.probe_status, dict)]
    stepped = any(r.trajectory or r.other_ranks for r in records)
    if not missing:
        return Evidence(True, stepped)
    runs = " and ".join(f"run {name}" for name in missing)
    return Evidence(False, stepped, f"{runs}: {why_not_loaded(command)}")


def check_run(record: RunRecord, command: str | Sequence[str] | None) -> None:
    """Stop after a run that was not observed and left no artifact: nothing can be compared."""
    if not record.artifacts and not isinstance(record.probe_status, dict):
        check(Evidence(False, False, f"run {record.name}: {why_not_loaded(command)}"),
              {"artifacts": []})


def check(evidence: Evidence | None, comparison: Mapping[str, Any]) -> None:
    """Raise `probe_not_loaded` when a run was not observed and no artifact was compared."""
    if evidence is None or evidence.not_loaded is None or comparison["artifacts"]:
        return
    raise GateError(
        f"the probe did not load in {evidence.not_loaded}; or compare files only"
        " (`artifacts:`, -a GLOB)",
        kind=ErrorKind.PROBE_NOT_LOADED,
    )


def qualify(reasons: list[Reason], evidence: Evidence | None) -> list[Reason]:
    """The verdict's reasons, the first saying when they rest on the artifacts only."""
    words = limitation(evidence.to_manifest() if evidence else None)
    if not words or not reasons:
        return reasons
    first = reason(reasons[0]["code"], f"{reasons[0]['message']} ({words})")
    return [first, *reasons[1:]]


def why_not_loaded(command: str | Sequence[str] | None) -> str:
    """The likely reason the probe did not load, read from the command, with its fix."""
    words = _words(command)
    if any(_clears_path(words, i) for i in range(len(words))):
        return CLEARS_PATH
    pythons = [i for i, word in enumerate(words) if PYTHON_NAME.fullmatch(os.path.basename(word))]
    for index in pythons:
        for flag in _flags(words[index + 1:]):
            if flag in SKIPPING_FLAGS:
                return SKIPPING_FLAGS[flag]
    if words and not pythons:
        return NOT_PYTHON.format(program=os.path.basename(_program(words)))
    return UNKNOWN


def _words(command: str | Sequence[str] | None) -> list[str]:
    if command is None:
        return []
    words = [command] if isinstance(command, str) else list(command)
    # `sh -c "python -I train.py"`: the words inside a word count too.
    return [part for word in words for part in _split(word)]


def _split(text: str) -> list[str]:
    if not any(c.isspace() for c in text):
        return [text]
    try:
        parts = shlex.split(text)
    except ValueError:
        parts = text.split()
    if parts == [text]:
        return parts
    return [word for part in parts for word in _split(part)]


def _clears_path(words: list[str], index: int) -> bool:
    """`PYTHONPATH=…` as an assignment, `env -u PYTHONPATH`, `env -i`, `unset PYTHONPATH`."""
    word = words[index]
    before = words[index - 1] if index else ""
    return (
        (word.startswith(CLEARED_PATH) and "$PYTHONPATH" not in word
         and "${PYTHONPATH" not in word)
        or word in ("--unset=PYTHONPATH", "-uPYTHONPATH")
        or (word == "PYTHONPATH" and before in ("-u", "--unset", "unset"))
        or (word in ("-i", "--ignore-environment", "-") and "env" in os.path.basename(before))
    )


def _flags(arguments: list[str]) -> list[str]:
    """The interpreter's one-letter flags before the script, `-m` or `-c`."""
    flags: list[str] = []
    for argument in arguments:
        if not argument.startswith("-") or argument.startswith("--") or argument == "-":
            break
        letters = argument[1:]
        for letter in letters:
            flags.append(letter)
            if letter in "mcXW":  # the rest of the word, or the next one, is an argument
                return flags
    return flags


def _program(words: list[str]) -> str:
    """The program a command starts: past `env`, its options and assignments."""
    for word in words:
        if "=" in word or word.startswith("-") or os.path.basename(word) == "env":
            continue
        return word
    return words[0]
