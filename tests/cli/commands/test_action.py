"""`repro-gate action`: the action's inputs read from INPUT_* variables, refused before any run
(with the error published to the step), the interpreter a training starts with, and the
candidate lock of `mode: upgrade`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from repro_gate import validation
from repro_gate.cli.commands.action import (
    action,
    check_torch_without_image,
    training_python,
    upgrade_options,
)
from repro_gate.config import Config, ContainerConfig
from repro_gate.errors import ConfigError, ErrorKind, GateError


def config_in(tmp_path: Path, command: str | tuple[str, ...] | None,
              image: str | None = None) -> Config:
    return Config(workdir=tmp_path, output_dir=tmp_path / "out", command=command,
                  container=ContainerConfig(image=image))


@pytest.mark.parametrize(("command", "python"), [
    ("python3 train.py --epochs 1", "python3"),
    (("/opt/venv/bin/python3.12", "-m", "trainer"), "/opt/venv/bin/python3.12"),
    ("python train.py", "python"),
    ("bash run.sh", None),
    ("torchrun --nproc-per-node 2 train.py", None),
    ("python 'unbalanced", None),
])
def test_the_training_python_is_the_commands_first_word_when_it_is_python(
    tmp_path: Path, command: str | tuple[str, ...], python: str | None
) -> None:
    assert training_python(config_in(tmp_path, command)) == python


def test_the_reference_training_runs_with_this_interpreter(tmp_path: Path) -> None:
    assert training_python(config_in(tmp_path, None)) == sys.executable


def test_a_python_without_torch_in_the_actions_image_is_refused(tmp_path: Path) -> None:
    python = tmp_path / "python3"
    python.write_text("#!/bin/sh\nexit 1\n")  # as `python3 -c "import torch"` fails there
    python.chmod(0o755)

    with pytest.raises(GateError) as raised:
        check_torch_without_image(config_in(tmp_path, f"{python} train.py"), dict(os.environ))

    assert raised.value.kind is ErrorKind.IMAGE_REQUIRED
    assert raised.value.message.startswith(f'`{python} -c "import torch"` fails in the action\'s'
                                           " own image")


def test_torch_is_not_checked_with_an_image_or_an_interpreter_that_cannot_start(
    tmp_path: Path,
) -> None:
    python = tmp_path / "python3"
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)

    check_torch_without_image(config_in(tmp_path, f"{python} t.py", image="img@sha256:" + "a" * 64),
                              {})
    check_torch_without_image(config_in(tmp_path, f"{tmp_path / 'absent' / 'python'} t.py"), {})
    check_torch_without_image(config_in(tmp_path, "bash run.sh"), {})


def test_a_bad_mode_is_published_to_the_step_after_masking_the_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    outputs = tmp_path / "github_output"
    environ = {"INPUT_MODE": "bisect", "INPUT_OUTPUT-DIR": "out",
               "INPUT_GITHUB-TOKEN": "ghs_secret_token", "GITHUB_ACTIONS": "true",
               "GITHUB_OUTPUT": str(outputs)}

    with pytest.raises(ConfigError) as raised:
        action(environ)

    assert raised.value.message == "input mode: must be check or upgrade, got 'bisect'"
    lines = capsys.readouterr().out.splitlines()
    assert lines.index("::add-mask::ghs_secret_token") < next(
        i for i, line in enumerate(lines) if line.startswith("::error"))
    written = outputs.read_text().splitlines()
    verdict_at = next(i for i, line in enumerate(written) if line.startswith("verdict<<"))
    assert written[verdict_at + 1] == "error"
    assert f"{tmp_path / 'out' / 'manifest.json'}" in written
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert validation.errors("manifest", manifest) == []
    assert manifest["reasons"] == [{"code": "config", "message": raised.value.message}]


def test_an_attest_input_other_than_true_or_false_is_refused_before_any_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    environ = {"INPUT_ATTEST": "yes", "INPUT_OUTPUT-DIR": "out", "GITHUB_ACTIONS": "true",
               "GITHUB_OUTPUT": str(tmp_path / "github_output")}

    with pytest.raises(ConfigError) as raised:
        action(environ)

    assert raised.value.message == "input attest: must be true or false, got 'yes'"
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert (manifest["verdict"], manifest["runs"]) == ("error", [])


def test_the_upgrade_candidate_comes_from_the_inputs(tmp_path: Path) -> None:
    config = config_in(tmp_path, "python train.py")

    given = upgrade_options(config, {"INPUT_CANDIDATE-LOCK": "pr/uv.lock",
                                     "INPUT_WRITE-LOCK": "true"})
    computed = upgrade_options(config, {"INPUT_UPGRADE-PACKAGES": "torch, numpy"})

    assert given.candidate.lock == Path("pr/uv.lock").absolute()
    assert given.write_lock is True
    assert computed.candidate.request is not None
    assert computed.candidate.request.packages == ("torch", "numpy")
    assert computed.write_lock is False


def test_a_given_and_a_computed_candidate_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="set only one of them"):
        upgrade_options(config_in(tmp_path, "python t.py"),
                        {"INPUT_CANDIDATE-LOCK": "x.lock", "INPUT_UPGRADE-PACKAGES": "torch"})


def test_a_pull_request_event_without_its_base_commit_is_refused(tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": 3, "base": {}}}))
    environ = {"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(event)}

    with pytest.raises(ConfigError) as raised:
        upgrade_options(config_in(tmp_path, "python t.py"), environ)

    assert raised.value.message == ("the pull_request event names no base commit"
                                    " (pull_request.base.sha): set candidate-lock")
