"""What a training command says about the probe: is it Python, and why would the probe not load
in it (read from the command, and from the scripts it runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro_gate.gate.command_facts import (
    CLEARS_ENVIRONMENT,
    REPLACES_PATH,
    SKIPPING_FLAGS,
    UNKNOWN,
    UNSETS_PATH,
    CommandFacts,
    read,
)


@pytest.mark.parametrize(("command", "expected"), [
    ("python -I train.py", SKIPPING_FLAGS["I"]),
    ("python3.11 -u -E train.py", SKIPPING_FLAGS["E"]),
    (["/usr/bin/python", "-BS", "train.py"], SKIPPING_FLAGS["S"]),
    ("sh -c 'python -I train.py'", SKIPPING_FLAGS["I"]),
    ("env -u PYTHONPATH python train.py", UNSETS_PATH),
    ("unset PYTHONPATH && python train.py", UNSETS_PATH),
    ("env -i PYTHONPATH=lib python train.py", CLEARS_ENVIRONMENT),
    # Where the gate cannot put its folder in front: inside quotes, in a command list.
    ("bash -c 'PYTHONPATH=lib python train.py'", REPLACES_PATH),
    (["env", "PYTHONPATH=lib", "python", "train.py"], REPLACES_PATH),
])
def test_a_python_command_that_keeps_the_probe_out_says_why(
    tmp_path: Path, command: str | list[str], expected: str
) -> None:
    assert read(command, tmp_path) == CommandFacts(True, expected)


@pytest.mark.parametrize("command", [
    "PYTHONPATH=lib python train.py",  # the gate puts its folder in front of lib
    "export PYTHONPATH=lib; python train.py",
    "env PYTHONPATH=lib python train.py",
    "PYTHONPATH=src:$PYTHONPATH python train.py",
    ["python", "train.py", "-I"],  # the training's own arguments
    ["python", "-m", "pkg", "-S"],
    "torchrun --nproc_per_node 2 train.py",
])
def test_a_python_command_that_lets_the_probe_in_is_not_blamed(
    tmp_path: Path, command: str | list[str]
) -> None:
    assert read(command, tmp_path) == CommandFacts(True, UNKNOWN)


def test_the_reference_training_is_python(tmp_path: Path) -> None:
    assert read(None, tmp_path) == CommandFacts(True, UNKNOWN)


def test_a_program_that_is_not_python_is_named(tmp_path: Path) -> None:
    facts = read("env FOO=1 /opt/bin/trainer --epochs 1", tmp_path)

    assert facts.python is False
    assert facts.why_not_loaded.startswith("trainer is not Python")
    assert "have trainer start it" in facts.why_not_loaded


def test_a_wrapper_script_is_read_for_python_and_for_what_keeps_the_probe_out(
    tmp_path: Path,
) -> None:
    (tmp_path / "run.sh").write_text("#!/bin/bash\n# env -u PYTHONPATH: not any more\n"
                                     "exec env -i python train.py \"$@\"\n")
    (tmp_path / "train").write_text("#!/usr/bin/env python3\nprint('trained')\n")
    (tmp_path / "weights.sh").write_text("printf 'w' > model.bin\n")
    (tmp_path / "trainer").write_bytes(b"\x7fELF\0\0python -I")

    wrapped = read("./run.sh --fast", tmp_path)

    assert wrapped == CommandFacts(True, f"./run.sh: {CLEARS_ENVIRONMENT}")
    assert read(["./train"], tmp_path) == CommandFacts(True, UNKNOWN)
    assert read("sh weights.sh", tmp_path).python is False
    assert read("./trainer", tmp_path).python is False  # a program is not read as a script
