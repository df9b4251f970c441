"""What an interpreter sees (this one, run once) and whether pins are met there."""

from __future__ import annotations

import importlib.metadata
import platform
import sys
from pathlib import Path

import pytest

from repro_gate.environments.interpreter import (
    Distribution,
    Interpreter,
    already_met,
    inspect,
    satisfies,
    unmet,
)
from repro_gate.errors import ErrorKind, GateError

MARKERS = {"python_version": "3.11", "python_full_version": "3.11.7", "sys_platform": "linux",
           "platform_system": "Linux", "platform_machine": "x86_64", "os_name": "posix",
           "implementation_name": "cpython", "platform_python_implementation": "CPython"}


def interpreter(**distributions: Distribution) -> Interpreter:
    return Interpreter("/usr/bin/python3", "3.11.7", ("/usr/lib/python3/site-packages",),
                       MARKERS, {name.replace("_", "-"): d for name, d in distributions.items()})


IMAGE = interpreter(
    torch=Distribution("2.4.0+cu121", ("numpy>=1.22", "filelock", "sympy; python_version<'3'",
                                       "triton==3.0.0; sys_platform == 'linux'")),
    numpy=Distribution("2.0.1", ()),
    filelock=Distribution("3.15.4", ()),
    triton=Distribution("2.3.1", ()),
)


def test_a_pin_without_a_local_label_is_met_by_any_local_build() -> None:
    assert satisfies("2.4.0+cu121", "2.4.0")
    assert not satisfies("2.4.0+cu121", "2.4.0+cpu")
    assert not satisfies("2.4.1", "2.4.0")
    assert satisfies("1.0.0", "1.0")
    assert satisfies("not a version", "not a version")


def test_the_pins_the_image_already_meets_are_inherited() -> None:
    pins = {"torch": "2.4.0", "numpy": "1.26.4", "rich": "13.7.1"}

    assert already_met(IMAGE, pins) == {"torch": "2.4.0+cu121"}


def test_unmet_pins_and_requirements_are_named_one_per_line() -> None:
    pins = {"torch": "2.4.0", "numpy": "2.0.1", "rich": "13.7.1", "filelock": "3.15.4",
            "mylib": "https://files.example/mylib-1.0-py3-none-any.whl"}

    problems = unmet(IMAGE, pins)

    assert problems == [
        "mylib==https://files.example/mylib-1.0-py3-none-any.whl is pinned,"
        " but it is not installed",
        "rich==13.7.1 is pinned, but it is not installed",
        "torch 2.4.0+cu121 requires triton==3.0.0; sys_platform == \"linux\","
        " but triton 2.3.1 is installed",
    ]
    assert unmet(IMAGE, {"numpy": "2.0.1", "filelock": "3.15.4"}) == []


def test_a_requirement_that_is_missing_is_named() -> None:
    seen = interpreter(app=Distribution("1.0", ("requests>=2",)))

    assert unmet(seen, {"app": "1.0"}) == ["app 1.0 requires requests>=2, which is not installed"]


def test_this_interpreter_is_inspected_as_it_sees_itself() -> None:
    seen = inspect(Path(sys.executable))

    assert seen.version == sys.version
    assert seen.markers["python_full_version"] == platform.python_version()
    assert seen.markers["sys_platform"] == sys.platform
    assert seen.distributions["packaging"].version == importlib.metadata.version("packaging")
    assert already_met(seen, {"pytest": importlib.metadata.version("pytest")}) != {}


def test_an_interpreter_that_cannot_run_is_an_environment_error(tmp_path: Path) -> None:
    with pytest.raises(GateError) as missing:
        inspect(tmp_path / "bin" / "python")
    failing = tmp_path / "python"
    failing.write_text("#!/bin/sh\necho 'broken interpreter' >&2\nexit 3\n", encoding="utf-8")
    failing.chmod(0o755)
    with pytest.raises(GateError) as broken:
        inspect(failing)

    assert missing.value.kind == broken.value.kind == ErrorKind.ENVIRONMENT
    assert missing.value.message.startswith(f"cannot run {tmp_path / 'bin' / 'python'}: ")
    assert broken.value.message == f"cannot inspect {failing}: broken interpreter"
