"""The script that builds or seals an environment in a volume, and its answer. The script is
stdlib-only; here it runs with this interpreter on a folder standing in for the volume, in the
cases that need no installer (a volume already sealed, a build to seal, a build gone)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from repro_gate.environments.docker_build import BUILD_SCRIPT, BuildAnswer, build_request
from repro_gate.environments.package_sources import InstallGroup
from repro_gate.errors import ErrorKind, GateError

NAMES = {"lock": ".repro-gate.lock", "built": ".repro-gate-built.json", "marker": "env.json"}


def run_script(root: Path, request: dict[str, Any]) -> BuildAnswer:
    spec = {**request, **NAMES, "root": str(root)}
    completed = subprocess.run([sys.executable, "-c", BUILD_SCRIPT, json.dumps(spec)],
                               capture_output=True, text=True, timeout=30, check=False)
    return BuildAnswer.parse(completed, "the build")


def test_the_request_carries_each_group_and_keeps_only_masked_pins() -> None:
    groups = [InstallGroup(("--index-url https://ci:s3cret@pypi.example/simple",),
                           ("numpy==2.0.1 --hash=sha256:aa",), True),
              InstallGroup((), ("-e /src/pkg",), False)]

    request = build_request("k" * 64, groups)

    assert request["mode"] == "build" and request["key"] == "k" * 64
    assert request["groups"] == [
        {"text": "--index-url https://ci:s3cret@pypi.example/simple\n"
                 "numpy==2.0.1 --hash=sha256:aa\n", "hashes": True},
        {"text": "-e /src/pkg\n", "hashes": False}]
    assert "s3cret" not in request["pins_text"]
    assert request["pins_text"].endswith("numpy==2.0.1 --hash=sha256:aa\n-e /src/pkg\n")


def test_sealing_a_finished_build_writes_the_marker_once(tmp_path: Path) -> None:
    built = {"key": "k1", "check": {"returncode": 0, "stdout": "", "stderr": ""},
             "python": "/usr/bin/python3"}
    (tmp_path / NAMES["built"]).write_text(json.dumps(built), encoding="utf-8")
    marker = {"key": "k1", "pins": {"numpy": "2.0.1"}, "problems": []}

    sealed = run_script(tmp_path, {"mode": "seal", "key": "k1", "document": marker})
    again = run_script(tmp_path, {"mode": "build", "key": "k1"})

    assert sealed.marker == marker
    assert json.loads((tmp_path / NAMES["marker"]).read_text()) == marker
    assert again.marker == marker  # a sealed volume is not built again
    assert (tmp_path / NAMES["lock"]).exists()


def test_a_finished_build_not_yet_sealed_is_answered_with_its_check(tmp_path: Path) -> None:
    check = {"returncode": 1, "stdout": "The package a requires b\n", "stderr": ""}
    (tmp_path / NAMES["built"]).write_text(
        json.dumps({"key": "k2", "check": check, "python": "/opt/py/bin/python"}),
        encoding="utf-8")

    answer = run_script(tmp_path, {"mode": "build", "key": "k2"})

    assert (answer.marker, answer.failed, answer.python) == (None, None, "/opt/py/bin/python")
    assert (answer.check.returncode, answer.check.stdout) == (1, "The package a requires b\n")


def test_a_build_of_another_key_or_none_at_all_cannot_be_sealed(tmp_path: Path) -> None:
    (tmp_path / NAMES["built"]).write_text(json.dumps({"key": "other"}), encoding="utf-8")

    answer = run_script(tmp_path, {"mode": "seal", "key": "k3", "document": {"key": "k3"}})

    assert answer.marker is None and answer.failed is None
    assert not (tmp_path / NAMES["marker"]).exists()


def test_a_failed_step_is_read_from_the_last_line() -> None:
    output = ("uv says things\n" + json.dumps(
        {"failed": "install", "check": {"returncode": 2, "stdout": "", "stderr": "no wheel"}}))

    answer = BuildAnswer.parse(subprocess.CompletedProcess(["python"], 0, output, ""), "build")

    assert answer.failed == "install"
    assert (answer.check.returncode, answer.check.stderr) == (2, "no wheel")


@pytest.mark.parametrize("stdout", ["", "not json", '["a list"]', '{"check": {"stdout": 1}}'])
def test_no_answer_is_an_environment_error_with_the_scripts_last_words(stdout: str) -> None:
    completed = subprocess.CompletedProcess(["python"], 127, stdout,
                                            "exec: python: not found")

    with pytest.raises(GateError) as raised:
        BuildAnswer.parse(completed, "the build in image sha256:abc")

    assert raised.value.kind == ErrorKind.ENVIRONMENT
    assert raised.value.message.startswith("the build in image sha256:abc failed: ")
