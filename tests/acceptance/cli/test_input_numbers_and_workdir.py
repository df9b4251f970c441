"""Numbers that are not finite or are negative, and a missing workdir: one line, exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.gate_cli import check

from repro_gate.config.overrides import from_action_inputs
from repro_gate.errors import ConfigError


def assert_one_line_error(stderr: str, code: int, *needles: str) -> None:
    assert code == 2, stderr
    assert "Traceback" not in stderr
    (line,) = stderr.strip().splitlines()
    assert line.startswith("repro-gate: error: ")
    for needle in needles:
        assert needle in line, line


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--timeout", "nan"], "timeout: must be a finite number >= 0, got nan"),
        (["--timeout", "inf"], "timeout: must be a finite number >= 0, got inf"),
        (["--timeout", "-1"], "timeout: must be a number > 0"),
        (["--cost-warmup", "-1"], "cost.warmup: must be an integer >= 0"),
        (["--metrics-timeout", "nan"], "metrics.timeout: must be a finite number"),
        (["--report-timeout", "-5"], "report.timeout: must be a number > 0"),
    ],
)
def test_bad_numbers_on_the_command_line(tmp_path: Path, flags: list[str], needle: str) -> None:
    result = check(tmp_path, *flags, "--", "python", "train.py")
    assert_one_line_error(result.stderr, result.exit_code, needle)


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("timeout: .nan\n", "timeout: must be a finite number >= 0, got nan"),
        ("timeout: .inf\n", "timeout: must be a finite number >= 0, got inf"),
        ("tolerance: {atol: .nan}\n", "tolerance.atol: must be a finite number >= 0, got nan"),
        ("metrics: {timeout: .nan}\n", "metrics.timeout: must be a finite number"),
    ],
)
def test_bad_numbers_in_the_config_file(tmp_path: Path, content: str, needle: str) -> None:
    (tmp_path / ".repro-gate.yml").write_text(content)
    result = check(tmp_path)
    assert_one_line_error(result.stderr, result.exit_code, ".repro-gate.yml: " + needle)


@pytest.mark.parametrize("text", ["nan", "inf", "-3"])
def test_bad_numbers_as_action_inputs(text: str) -> None:
    with pytest.raises(ConfigError, match="input timeout: must be a finite number >= 0"):
        from_action_inputs({"INPUT_TIMEOUT": text})


def test_missing_workdir_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    result = check(tmp_path, "--workdir", str(missing), "--", "python", "train.py")
    assert_one_line_error(result.stderr, result.exit_code, f"workdir {missing} does not exist")
