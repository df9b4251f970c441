"""`repro-gate calibrate` refusing what cannot be calibrated before any config is read or run
started: too few samples, bad flags, a missing config; nothing half-written."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro_gate.calibrate import DEFAULT_SAMPLES, MIN_SAMPLES
from repro_gate.cli.commands.calibrate import calibrate
from repro_gate.cli.main import build_parser, main
from repro_gate.errors import EXIT_ERROR, ConfigError, ErrorKind, GateError


def test_the_default_sample_count_and_the_trailing_command_are_parsed() -> None:
    args = build_parser().parse_args(["calibrate", "-q", "--", "python", "train.py"])

    assert args.samples == DEFAULT_SAMPLES
    assert args.quiet is True
    assert args.trailing_command == ["--", "python", "train.py"]


@pytest.mark.parametrize("samples", [MIN_SAMPLES - 1, 0, -3])
def test_too_few_samples_are_refused_before_the_config_is_read(
    tmp_path: Path, samples: int
) -> None:
    with pytest.raises(GateError) as raised:
        calibrate(tmp_path / "absent.yml", {}, samples)  # the config would fail too: later

    assert raised.value.kind is ErrorKind.CONFIG
    assert raised.value.message == (f"--samples must be at least {MIN_SAMPLES} (a spread needs"
                                    f" two runs), got {samples}")


def test_too_few_samples_on_the_command_line_are_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)

    assert main(["calibrate", "--samples", "1", "--", "python", "train.py"]) == EXIT_ERROR

    assert capsys.readouterr().err == (f"repro-gate: error: --samples must be at least"
                                       f" {MIN_SAMPLES} (a spread needs two runs), got 1\n")
    assert list(tmp_path.iterdir()) == []  # no output directory, no calibration.json


def test_a_missing_config_is_raised_and_nothing_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    with pytest.raises(ConfigError):
        calibrate(tmp_path / "absent.yml", {"output_dir": "out"}, MIN_SAMPLES, quiet=True)

    assert list(tmp_path.iterdir()) == []


def test_a_non_integer_sample_count_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["calibrate", "--samples", "many"])

    assert exited.value.code == 2
    assert "argument --samples: invalid int value: 'many'" in capsys.readouterr().err
