"""A command string's own PYTHONPATH assignments get the gate's folders in front: which words are
assignments, what the text becomes, and what the shell then hands the training."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from repro_gate.launch.shell import SHELL
from repro_gate.launch.shell_assignments import (
    ALONE,
    GATE_PYTHONPATH,
    IN_FRONT,
    as_written,
    assignments,
    keep_gate_path,
)

PRINT_PATH = f"{sys.executable} -c 'import os; print(os.environ.get(\"PYTHONPATH\"))'"


@pytest.mark.parametrize(("text", "expected"), [
    ("PYTHONPATH=lib python train.py", f"PYTHONPATH={IN_FRONT}lib python train.py"),
    ("A=1 PYTHONPATH=\"$PWD/lib\" python train.py",
     f"A=1 PYTHONPATH={IN_FRONT}\"$PWD/lib\" python train.py"),
    ("export PYTHONPATH=lib; python train.py", f"export PYTHONPATH={IN_FRONT}lib; python train.py"),
    ("env -u CUDA_HOME PYTHONPATH=lib python train.py",
     f"env -u CUDA_HOME PYTHONPATH={IN_FRONT}lib python train.py"),
    ("/usr/bin/env PYTHONPATH=lib python train.py",
     f"/usr/bin/env PYTHONPATH={IN_FRONT}lib python train.py"),
    ("python prep.py && PYTHONPATH=lib python train.py 2>&1 | tee log",
     f"python prep.py && PYTHONPATH={IN_FRONT}lib python train.py 2>&1 | tee log"),
    ("cd src\nPYTHONPATH=. python train.py",
     f"cd src\nPYTHONPATH={IN_FRONT}. python train.py"),
    ("(PYTHONPATH=lib python train.py)", f"(PYTHONPATH={IN_FRONT}lib python train.py)"),
    ("if true; then PYTHONPATH=lib python t.py; fi",
     f"if true; then PYTHONPATH={IN_FRONT}lib python t.py; fi"),
    ("PYTHONPATH= python train.py", f"PYTHONPATH={ALONE} python train.py"),
    ("PYTHONPATH=$(pwd)/lib python t.py", f"PYTHONPATH={IN_FRONT}$(pwd)/lib python t.py"),
])
def test_each_assignment_gets_the_gates_folders_in_front(text: str, expected: str) -> None:
    assert keep_gate_path(text) == expected
    assert as_written(expected) == text


@pytest.mark.parametrize("text", [
    "PYTHONPATH=lib:$PYTHONPATH python train.py",  # extends: the gate's folders are in it
    "PYTHONPATH=${PYTHONPATH}:lib python train.py",
    "sh -c 'PYTHONPATH=lib python train.py'",  # inside quotes: another shell's assignment
    "bash -c \"PYTHONPATH=lib python train.py\"",
    "python train.py PYTHONPATH=lib",  # an argument of the training
    "echo PYTHONPATH=lib > where.txt",
    "python train.py > PYTHONPATH=lib",  # a redirection's target
    "python train.py # PYTHONPATH=lib",
    "LIBPATH=lib python train.py",
])
def test_what_is_no_assignment_of_the_commands_environment_stays(text: str) -> None:
    assert keep_gate_path(text) == text


def test_the_words_in_assignment_position_are_found_with_their_offsets() -> None:
    text = "A=1 B='x y' env -i -C /tmp C=3 prog D=4; export E=5 F"

    found = assignments(text)

    assert [word.text for word in found] == ["A=1", "B='x y'", "C=3", "E=5"]
    assert all(text[word.start:].startswith(word.text) for word in found)


@pytest.mark.parametrize("text", [
    f"PYTHONPATH='lib' {PRINT_PATH}",
    f"export PYTHONPATH=lib; {PRINT_PATH}",
    f"env PYTHONPATH=lib {PRINT_PATH}",
])
def test_the_shell_hands_the_training_the_gates_folders_first(text: str) -> None:
    gate_folders = os.pathsep.join(["/gate/probe folder", "/gate/reference"])

    with_folders = run(keep_gate_path(text), {GATE_PYTHONPATH: gate_folders})
    without = run(keep_gate_path(text), {})

    assert with_folders == f"{gate_folders}{os.pathsep}lib"
    assert without == "lib"  # outside the gate the command does what it says


def test_an_emptied_pythonpath_holds_the_gates_folders_only() -> None:
    assert run(keep_gate_path(f"PYTHONPATH= {PRINT_PATH}"), {GATE_PYTHONPATH: "/gate"}) == "/gate"
    assert run(keep_gate_path(f"PYTHONPATH= {PRINT_PATH}"), {}) == ""


def run(text: str, extra: dict[str, str]) -> str:
    env = {"PATH": os.environ.get("PATH", os.defpath), **extra}
    done = subprocess.run([SHELL, "-c", text], env=env, capture_output=True, text=True,
                          timeout=60, check=True)
    return done.stdout.strip()
