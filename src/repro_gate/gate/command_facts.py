"""What a training command says about the probe: whether it runs Python, and why the probe
would not load in it, with the fix.

Read from the command as the run gets it (a command string after the gate's folders went in
front of its own `PYTHONPATH` assignments, `launch/shell_assignments.py`), and from the scripts
it names in the working directory: a wrapper script that starts python, or resets its
environment, is read too. Only a guess: the gate decides whether the probe loaded from the
probe's own status file, and asks this only when it did not.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from repro_gate.launch.shell_assignments import GATE_PYTHONPATH, keep_gate_path

PYTHON_NAME = re.compile(r"(python|pypy)[0-9.]*(\.exe)?", re.IGNORECASE)
SHELL_NAME = re.compile(r"(ba|da|z|k|a)?sh")
SHEBANG = re.compile(r"#!\s*(\S+)(?:\s+(\S+))?")
SCRIPT_BYTES = 65536  # enough of a wrapper script to read what it runs
ASSIGNED_PATH = "PYTHONPATH="
EXTENDED_PATH = re.compile(r"\$\{?(PYTHONPATH|" + GATE_PYTHONPATH + r")\b")
# Interpreter flags that keep the probe out: why, and what to do instead.
SKIPPING_FLAGS = {
    "I": "python -I ignores PYTHONPATH, which loads the probe; drop -I (-P keeps the script's"
         " directory off sys.path)",
    "E": "python -E ignores PYTHONPATH, which loads the probe; drop -E",
    "S": "python -S skips sitecustomize, which loads the probe; drop -S",
}
CLEARS_ENVIRONMENT = (
    "env -i starts the training without the gate's variables, which load the probe; drop -i"
    " and give the training what it needs with `env:` in .repro-gate.yml"
)
UNSETS_PATH = (
    "the command unsets PYTHONPATH, which loads the probe; leave it set"
    " (`env: {PYTHONPATH: src}` puts your folders after the probe's)"
)
REPLACES_PATH = (
    "the command replaces PYTHONPATH where the gate cannot put the probe's folder in front"
    " (inside quotes, in a script, or in a command list); extend it instead"
    " (PYTHONPATH=src:$PYTHONPATH), or set it with `env: {PYTHONPATH: src}`"
)
NOT_PYTHON = (
    "{program} is not Python and started no Python that loaded the probe; run the training"
    " with python, or have {program} start it without -I/-S/-E and with the gate's PYTHONPATH"
)
UNKNOWN = (
    "the interpreter did not import sitecustomize from PYTHONPATH (an embedded or frozen"
    " interpreter, or a wrapper that resets the environment); run the training with a plain"
    " python"
)


@dataclass(frozen=True)
class CommandFacts:
    """What the command says about the probe."""

    python: bool  # it starts a Python interpreter or a Python script (directly or in a script)
    why_not_loaded: str  # the likely reason the probe did not load, and the fix


@dataclass(frozen=True)
class Script:
    """A file the command names in the working directory, read as a script."""

    name: str  # as the command names it
    python: bool  # a Python script (`.py`, or a python shebang)
    words: list[str]  # a shell script's words; empty for any other file


def read(command: str | Sequence[str] | None, workdir: Path) -> CommandFacts:
    """The facts of `command` (None: the embedded reference training, which is Python)."""
    if command is None:
        return CommandFacts(True, UNKNOWN)
    words = _words(keep_gate_path(command) if isinstance(command, str) else command)
    scripts = [script for word in words if (script := _script(word, workdir)) is not None]
    python = _runs_python(words) or any(s.python or _runs_python(s.words) for s in scripts)
    # (where, why): the command's own words first, then each script's.
    reasons: list[tuple[str | None, str | None]] = [
        (None, _reason(words)), *((s.name, _reason(s.words)) for s in scripts)]
    for where, found in reasons:
        if found is not None:
            return CommandFacts(python, f"{where}: {found}" if where else found)
    if not python:
        return CommandFacts(False, NOT_PYTHON.format(program=os.path.basename(_program(words))))
    return CommandFacts(True, UNKNOWN)


def _runs_python(words: list[str]) -> bool:
    return any(PYTHON_NAME.fullmatch(os.path.basename(word)) or word.endswith(".py")
               for word in words)


def _reason(words: list[str]) -> str | None:
    """Why these words keep the probe out, with the fix; None when they do not say."""
    for index, word in enumerate(words):
        before = words[index - 1] if index else ""
        if word in ("-i", "--ignore-environment", "-") and "env" in os.path.basename(before):
            return CLEARS_ENVIRONMENT
        if word in ("--unset=PYTHONPATH", "-uPYTHONPATH") or (
                word == "PYTHONPATH" and before in ("-u", "--unset", "unset")):
            return UNSETS_PATH
        if word.startswith(ASSIGNED_PATH) and not EXTENDED_PATH.search(word):
            return REPLACES_PATH
    for index, word in enumerate(words):
        if PYTHON_NAME.fullmatch(os.path.basename(word)):
            for flag in _flags(words[index + 1:]):
                if flag in SKIPPING_FLAGS:
                    return SKIPPING_FLAGS[flag]
    return None


def _script(word: str, workdir: Path) -> Script | None:
    """The script `word` names, relative to the working directory; None for anything else."""
    if word.startswith("-") or not word.strip():
        return None
    path = workdir / word
    try:
        if not path.is_file():
            return None
        with path.open("rb") as file:
            head = file.read(SCRIPT_BYTES)
    except OSError:
        return None
    if b"\0" in head:
        return None  # a program or a data file
    text = head.decode("utf-8", errors="replace")
    interpreter = _interpreter(text)
    if path.suffix == ".py" or PYTHON_NAME.fullmatch(interpreter):
        return Script(word, True, [])
    if path.suffix == ".sh" or SHELL_NAME.fullmatch(interpreter):
        code = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
        return Script(word, False, _words("\n".join(code)))
    return None


def _interpreter(text: str) -> str:
    """The program a script's `#!` line names (past `env`), or ''."""
    match = SHEBANG.match(text)
    if match is None:
        return ""
    program = os.path.basename(match.group(1))
    if program == "env" and match.group(2):
        program = os.path.basename(match.group(2))
    return program


def _words(command: str | Sequence[str]) -> list[str]:
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
    return words[0] if words else "the command"
