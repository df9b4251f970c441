"""The keys of reporting (GitHub, the Pushgateway) and of the output directory."""

from __future__ import annotations

from pathlib import Path

from repro_gate import config
from repro_gate.cli.main import build_parser
from repro_gate.config import Config, overrides
from repro_gate.config.keys import reporting
from repro_gate.config.model import ReportConfig

BY_PATH = {entry.path: entry for entry in reporting.KEYS}


def from_flags(tmp_path: Path, *argv: str) -> Config:
    return config.load(None, overrides.from_flags(build_parser().parse_args(["check", *argv])),
                       tmp_path)


def test_the_reporting_flags_set_the_report_and_metrics_sections(tmp_path: Path) -> None:
    loaded = from_flags(tmp_path, "--no-report", "--report-status", "always", "--no-comment",
                        "--error-conclusion", "neutral", "--report-timeout", "5",
                        "--pushgateway-url", "http://push:9091", "--metrics-job", "lm",
                        "--runner-slot", "gpu-1", "--metrics-timeout", "7", "-o", "out")

    assert loaded.report == ReportConfig(enabled=False, check_run=True, status="always",
                                         comment=False, error_conclusion="neutral", timeout=5.0)
    assert (loaded.metrics.pushgateway_url, loaded.metrics.job, loaded.metrics.runner_slot,
            loaded.metrics.timeout) == ("http://push:9091", "lm", "gpu-1", 7.0)
    assert loaded.output_dir == tmp_path.resolve() / "out"


def test_the_check_run_switch_is_in_the_config_file_only(tmp_path: Path) -> None:
    check_run = BY_PATH["report.check_run"]
    (tmp_path / ".repro-gate.yml").write_text("report: {check_run: false}\n")

    assert check_run.flags == () and check_run.action_input is None
    assert config.load(None, {}, tmp_path).report.check_run is False


def test_the_output_directory_has_a_short_flag_and_an_input(tmp_path: Path) -> None:
    output_dir = BY_PATH["output_dir"]
    from_input = config.load(None, overrides.from_action_inputs({"INPUT_OUTPUT-DIR": "out"}),
                             tmp_path)

    assert output_dir.flags == ("-o", "--output-dir") and output_dir.attribute == "output_dir"
    assert from_input.output_dir == from_flags(tmp_path, "--output-dir", "out").output_dir


def test_the_timeouts_show_their_defaults_in_seconds() -> None:
    timeout = BY_PATH["report.timeout"]

    assert timeout.help.format(default=timeout.default).endswith("(default 30)")
    assert timeout.doc_default is not None
    assert timeout.doc_default.format(default=timeout.default) == "30 (s per phase)"
