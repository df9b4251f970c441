"""The gate's boundaries that need no training: the output directory check, the error manifests
of a gate that could not start or broke, and a launcher that cannot open."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro_gate import publish, validation
from repro_gate.config import Config
from repro_gate.errors import EXIT_ERROR, ConfigError, ErrorKind, GateError
from repro_gate.gate.pipeline import (
    GATE_LOG,
    OUTPUT_SUBDIRS,
    check_baseline,
    configuration_error,
    ensure_writable,
    internal_error,
    run_gate,
)
from repro_gate.launch.base import Launcher


def config_in(tmp_path: Path, **fields: object) -> Config:
    workdir = tmp_path / "project"
    workdir.mkdir()
    return Config(workdir=workdir, output_dir=tmp_path / "out", command="python train.py",
                  **fields)


def written_manifest(output_dir: Path) -> dict[str, object]:
    document = json.loads((output_dir / "manifest.json").read_text())
    assert validation.errors("manifest", document) == []
    return document


def test_the_output_directory_and_its_subdirectories_are_created(tmp_path: Path) -> None:
    ensure_writable(tmp_path / "out")

    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(OUTPUT_SUBDIRS)


def test_an_output_directory_blocked_by_a_file_is_an_output_dir_error(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "logs").write_text("a file where a directory goes")

    with pytest.raises(GateError) as raised:
        ensure_writable(tmp_path / "out")

    assert raised.value.kind is ErrorKind.OUTPUT_DIR
    assert raised.value.message.startswith(f"directory {tmp_path / 'out' / 'logs'} is not"
                                           " writable:")


def test_a_configuration_error_still_writes_a_valid_error_manifest(tmp_path: Path) -> None:
    error = ConfigError("runs: must be at least 2")

    outcome = configuration_error(error, tmp_path / "out", publish.for_configuration_error({}))

    assert outcome.exit_code == EXIT_ERROR
    assert outcome.manifest_path == tmp_path / "out" / "manifest.json"
    document = written_manifest(tmp_path / "out")
    assert document["verdict"] == "error"
    assert document["reasons"] == [{"code": "config", "message": "runs: must be at least 2"}]


def test_an_unwritable_output_directory_leaves_the_error_unwritten(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")

    outcome = configuration_error(ConfigError("bad"), tmp_path / "file" / "out",
                                  publish.for_configuration_error({}))

    assert outcome.manifest_path is None
    assert outcome.manifest["verdict"] == "error"


def test_an_internal_error_is_one_line_with_its_traceback_in_the_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        raise ValueError("first line\nsecond line")
    except ValueError as caught:
        error = internal_error(caught, tmp_path)

    log = tmp_path / "logs" / GATE_LOG
    assert error.kind is ErrorKind.INTERNAL
    assert error.message == f"internal error: ValueError: first line; details in {log}"
    assert "Traceback (most recent call last)" in log.read_text()
    assert capsys.readouterr().err == f"repro-gate: {error.message}\n"


def test_an_unreadable_baseline_stops_the_gate_before_any_run(tmp_path: Path) -> None:
    config = config_in(tmp_path, baseline=tmp_path / "baseline.json")
    opened: list[Config] = []

    def open_launcher(config: Config) -> Launcher:
        opened.append(config)
        raise AssertionError("no launcher may open")

    with pytest.raises(GateError) as raised:
        check_baseline(config)
    outcome = run_gate(config, open_launcher, publish.for_gate(config, {}),
                       lambda name: print)

    assert raised.value.kind is ErrorKind.BASELINE
    assert opened == []
    assert outcome.exit_code == EXIT_ERROR
    assert outcome.manifest["reasons"][0]["code"] == "baseline"
    check_baseline(Config(workdir=tmp_path, output_dir=tmp_path))  # no baseline: no reading


def test_a_launcher_that_cannot_open_gives_an_error_manifest(tmp_path: Path) -> None:
    config = config_in(tmp_path)

    def no_docker(config: Config) -> Launcher:
        raise GateError("cannot reach the Docker daemon", kind=ErrorKind.DOCKER)

    outcome = run_gate(config, no_docker, publish.for_gate(config, {}), lambda name: print)

    assert outcome.exit_code == EXIT_ERROR
    assert outcome.records == []
    document = written_manifest(config.output_dir)
    assert document["verdict"] == "error"
    assert document["reasons"] == [{"code": "docker",
                                    "message": "cannot reach the Docker daemon"}]


def test_an_unexpected_exception_becomes_the_error_internal(tmp_path: Path) -> None:
    config = config_in(tmp_path)

    def broken(config: Config) -> Launcher:
        raise ZeroDivisionError("division by zero")

    outcome = run_gate(config, broken, publish.for_gate(config, {}), lambda name: print)

    reason = outcome.manifest["reasons"][0]
    assert reason["code"] == "internal"
    assert reason["message"].startswith("internal error: ZeroDivisionError: division by zero;")
    assert "ZeroDivisionError" in (config.output_dir / "logs" / GATE_LOG).read_text()
