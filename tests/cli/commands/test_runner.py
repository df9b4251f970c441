"""`repro-gate runner`: check-config's account of a real runner.yml, and the inputs refused
before any registration, engine or host change (a token on the command line, a slot that is
not there, a missing file)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.runner_files import SLOT_UUIDS, token_file, write_config

from repro_gate.cli.commands.runner import TOKEN_ON_COMMAND_LINE
from repro_gate.cli.main import main
from repro_gate.errors import EXIT_ERROR


def runner_yml(folder: Path, **top: object) -> Path:
    github = {"repository": "octo-org/trainer", "auth": {"token_file": token_file(folder).name}}
    return write_config(folder, github, work_root=str(folder / "work"), **top)


def test_check_config_prints_the_target_and_every_slot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = runner_yml(tmp_path)

    assert main(["runner", "check-config", "--config", str(path)]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"config: {path}"
    assert lines[1] == ("target: repository octo-org/trainer at https://api.github.com, runner"
                        f" group 1, auth: token file {tmp_path / 'token'}")
    assert lines[2] == f"work root: {tmp_path / 'work'}"
    assert lines[3] == "isolation: a rootless engine per slot, under the slot's own user"
    assert [line.split(":")[0] for line in lines[4:]] == ["slot 0", "slot 1"]
    assert lines[4].startswith(f"slot 0: {SLOT_UUIDS[0]} NVIDIA H100 80GB HBM3 ->"
                               " repro-gate-gpuhost-slot0 [self-hosted, gpu, ")
    assert ", user repro-gate-slot0, subordinate IDs " in lines[4]


def test_a_shared_engine_is_said_to_have_no_kernel_boundary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = runner_yml(tmp_path, isolation={"engine": "shared"})

    assert main(["runner", "check-config", "--config", str(path)]) == 0

    lines = capsys.readouterr().out.splitlines()
    assert lines[3].startswith("isolation: shared engine ")
    assert lines[3].endswith(", behind the filter only (no kernel boundary)")
    assert ", user " not in lines[4]


@pytest.mark.parametrize("action", ["check-config", "serve", "setup"])
def test_a_token_on_the_command_line_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], action: str
) -> None:
    path = runner_yml(tmp_path)

    assert main(["runner", action, "--config", str(path), "--token", "ghs_x"]) == EXIT_ERROR
    captured = capsys.readouterr()
    assert captured.err == f"repro-gate: error: {TOKEN_ON_COMMAND_LINE}\n"
    assert "ghs_x" not in captured.out + captured.err


@pytest.mark.parametrize(("action", "slot"), [("register-once", "2"), ("slot-endpoint", "-1"),
                                              ("audit", "7"), ("reset-slot", "2")])
def test_a_slot_this_machine_does_not_have_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], action: str, slot: str
) -> None:
    path = runner_yml(tmp_path)

    assert main(["runner", action, "--config", str(path), "--slot", slot]) == EXIT_ERROR
    assert capsys.readouterr().err == (
        f"repro-gate: error: --slot {slot}: this machine has slots 0 to 1\n")


def test_reset_slot_refuses_the_shared_engine_which_is_not_reset(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = runner_yml(tmp_path, isolation={"engine": "shared"})

    assert main(["runner", "reset-slot", "--config", str(path), "--slot", "0"]) == EXIT_ERROR
    assert capsys.readouterr().err == (
        f"repro-gate: error: {path}: isolation.engine shared: the host's daemon is not reset"
        " between jobs (only a slot's own engine is)\n")
    assert not (tmp_path / "work").exists()


def test_a_missing_runner_yml_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["runner", "check-config", "--config", str(tmp_path / "runner.yml")]) == (
        EXIT_ERROR)

    err = capsys.readouterr().err
    assert err.startswith("repro-gate: error: ") and err.count("\n") == 1
    assert "runner.yml" in err


def test_an_action_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["runner"])

    assert exited.value.code == 2
    assert "ACTION" in capsys.readouterr().err
