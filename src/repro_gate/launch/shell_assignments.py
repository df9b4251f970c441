"""A command string's own `PYTHONPATH` assignments, with the gate's folders put in front.

The probe loads from the gate's folders at the front of `PYTHONPATH`. A command string that
assigns `PYTHONPATH` itself would replace them, so before it runs, every assignment the shell
makes to the command's environment gets the gate's folders in front of the user's value:

    PYTHONPATH=lib python train.py             a prefix of a simple command
    export PYTHONPATH=lib; python train.py     `export` (and `readonly`, `local`, `declare`)
    env -u X PYTHONPATH=lib python train.py    `env`'s assignments, after its options

The inserted text refers to the variable `GATE_PYTHONPATH`, which both launchers set to the
gate's folders as the run sees them, so the same command works locally and in a container, and
adds nothing when the variable is unset. A value that extends `$PYTHONPATH` keeps the gate's
folders already. Assignments inside quotes (`sh -c "PYTHONPATH=lib ..."`), in a script the
command runs, or in a command list (no shell) are left as written: the gate cannot see them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

# The gate's own PYTHONPATH entries (the probe's folder first), as the run sees them.
GATE_PYTHONPATH = "REPRO_GATE_PYTHONPATH"
# Put in front of a non-empty value, and the whole value of an empty one; both expand to
# nothing when the variable is unset, and are quoted against the word splitting of `env`'s
# arguments (a folder with a blank in its path).
IN_FRONT = f'${{{GATE_PYTHONPATH}:+"${GATE_PYTHONPATH}":}}'
ALONE = f'${{{GATE_PYTHONPATH}:+"${GATE_PYTHONPATH}"}}'

ASSIGNED = "PYTHONPATH"
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
EXTENDS = re.compile(r"\$\{?PYTHONPATH\b")
# Words that end a simple command (the next word is in command position again).
OPERATORS = frozenset(";&|()\n")
REDIRECTIONS = frozenset("<>")
# Reserved words after which a command starts.
RESERVED = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{", "}",
                      "time", "exec", "command", "nohup"})
DECLARATIONS = frozenset({"export", "readonly", "local", "declare", "typeset"})
# `env`'s options that take the next word as their argument.
ENV_ARGUMENT_OPTIONS = frozenset({"-u", "--unset", "-C", "--chdir", "-S", "--split-string"})


class Position(Enum):
    """Where a word stands in a simple command."""

    COMMAND = "command"  # before the command's name: assignments and reserved words
    DECLARATION = "declaration"  # the arguments of `export` and its kin
    ENV = "env"  # `env`'s options and assignments, before the program it runs
    ARGUMENTS = "arguments"  # the program's arguments: nothing of its environment


@dataclass(frozen=True)
class Word:
    """One word of a command string as written: where it starts, its text with its quotes."""

    start: int
    text: str


def keep_gate_path(text: str) -> str:
    """`text` with the gate's folders put in front of each `PYTHONPATH` assignment it makes."""
    inserts = [word for word in assignments(text)
               if word.text.startswith(f"{ASSIGNED}=") and not EXTENDS.search(word.text)]
    for word in reversed(inserts):  # from the end: earlier offsets stay true
        at = word.start + len(ASSIGNED) + 1
        value_is_empty = at == word.start + len(word.text)
        text = text[:at] + (ALONE if value_is_empty else IN_FRONT) + text[at:]
    return text


def as_written(text: str) -> str:
    """The command string as the user wrote it, without what `keep_gate_path` inserted."""
    return text.replace(IN_FRONT, "").replace(ALONE, "")


def assignments(text: str) -> list[Word]:
    """The words of `text` that assign a variable of a command's environment."""
    found: list[Word] = []
    for command in simple_commands(text):
        position = Position.COMMAND
        takes_argument = False
        for word in command:
            if position is Position.ARGUMENTS:
                break
            if takes_argument:  # `env -u NAME`: NAME is the option's
                takes_argument = False
                continue
            if position is Position.ENV and word.text.startswith("-"):
                takes_argument = word.text in ENV_ARGUMENT_OPTIONS
                continue
            if ASSIGNMENT.match(word.text):
                found.append(word)
                continue
            if position is Position.DECLARATION or word.text in RESERVED:
                continue
            name = word.text.rsplit("/", 1)[-1]
            if name in DECLARATIONS and position is Position.COMMAND:
                position = Position.DECLARATION
            elif name == "env":
                position = Position.ENV
            else:
                position = Position.ARGUMENTS
    return found


def simple_commands(text: str) -> list[list[Word]]:
    """The unquoted words of `text`, grouped by simple command (split at `;`, `&`, `|`, `(`,
    `)` and new lines); a redirection's target and comments are left out."""
    commands: list[list[Word]] = [[]]
    index, start, redirected = 0, -1, False

    def end_word(end: int) -> None:
        nonlocal start, redirected
        if start >= 0:
            word = Word(start, text[start:end])
            if redirected:
                redirected = False
            elif not (word.text.isdigit() and end < len(text) and text[end] in REDIRECTIONS):
                commands[-1].append(word)  # `2>` is a redirection, not a word
        start = -1

    while index < len(text):
        char = text[index]
        if char == "#" and start < 0:
            index = _line_end(text, index)
            continue
        if char in REDIRECTIONS:  # `>`, `2>&1`, `&>`, `<<`: the next word is its target
            end_word(index)
            redirected = True
            while index < len(text) and text[index] in "<>&|":
                index += 1
            continue
        if char in " \t" or char in OPERATORS:
            end_word(index)
            if char in OPERATORS and commands[-1]:
                commands.append([])
            index += 1
            continue
        if start < 0:
            start = index
        index = _past(text, index)
    end_word(len(text))
    return [command for command in commands if command]


def _past(text: str, index: int) -> int:
    """The index after the character, quoted string or expansion that starts at `index`."""
    char = text[index]
    if char == "\\":
        return index + 2
    if char == "'":
        return _closing(text, index + 1, "'")
    if char in '"`':
        return _closing(text, index + 1, char, escapes=True)
    if text.startswith("$(", index) or text.startswith("${", index):
        return _balanced(text, index + 1)
    return index + 1


def _closing(text: str, index: int, quote: str, escapes: bool = False) -> int:
    while index < len(text) and text[index] != quote:
        index += 2 if escapes and text[index] == "\\" else 1
    return index + 1


def _balanced(text: str, index: int) -> int:
    """Past the bracket at `index` and everything up to its match (quotes respected)."""
    opening = text[index]
    closing = ")" if opening == "(" else "}"
    depth = 0
    while index < len(text):
        char = text[index]
        if char == opening:
            depth += 1
        elif char == closing:
            depth -= 1
            if depth == 0:
                return index + 1
        if char in "'\"`\\":
            index = _past(text, index)
            continue
        index += 1
    return index


def _line_end(text: str, index: int) -> int:
    end = text.find("\n", index)
    return len(text) if end < 0 else end
