"""The runner kit's Prometheus rules: promtool checks and unit tests, run from pytest."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers.metrics_servers import PROMETHEUS_DIR, ROOT, need_binary

pytestmark = pytest.mark.prometheus

RULE_FILES = ["recording-rules.yml", "alert-rules.yml"]
UNIT_TESTS = sorted((PROMETHEUS_DIR / "tests").glob("*.test.yml"))


def promtool(*args: str, cwd: Path = PROMETHEUS_DIR) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [need_binary("promtool"), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_rule_files_pass_promtool_check() -> None:
    result = promtool("check", "rules", *RULE_FILES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(RULE_FILES)


def test_scrape_config_passes_promtool_check() -> None:
    result = promtool("check", "config", "prometheus.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "honor_labels" in (PROMETHEUS_DIR / "prometheus.yml").read_text(encoding="utf-8")


def test_there_are_unit_tests_for_burn_rates_sli_pushes_and_the_runner() -> None:
    names = {path.name for path in UNIT_TESTS}
    assert {"slo-burn-rate.test.yml", "sli.test.yml", "pushgateway.test.yml",
            "runner.test.yml"} <= names


@pytest.mark.parametrize("test_file", UNIT_TESTS, ids=lambda path: path.name)
def test_promtool_unit_tests_pass(test_file: Path) -> None:
    result = promtool("test", "rules", str(test_file.relative_to(PROMETHEUS_DIR)))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@pytest.mark.parametrize(
    ("original", "broken"),
    [
        (
            "(14.4 * (1 - repro_gate:slo_objective:ratio))",
            "(1.44 * (1 - repro_gate:slo_objective:ratio))",
        ),
        ("repro_gate:sli_error:ratio_rate5m\n", "repro_gate:sli_error:ratio_rate1h\n"),
        ("vector(0.95)", "vector(0.99)"),
    ],
    ids=["page-threshold", "short-window-dropped", "objective"],
)
def test_burn_rate_unit_tests_catch_a_broken_rule(
    tmp_path: Path, original: str, broken: str
) -> None:
    # The unit tests must fail when a threshold, a window or the objective is wrong.
    kit = tmp_path / "prometheus"
    shutil.copytree(PROMETHEUS_DIR, kit)
    rules = kit / ("recording-rules.yml" if "vector" in original else "alert-rules.yml")
    text = rules.read_text(encoding="utf-8")
    assert original in text
    rules.write_text(text.replace(original, broken), encoding="utf-8")
    result = promtool("test", "rules", "tests/slo-burn-rate.test.yml", cwd=kit)
    assert result.returncode != 0
    assert "FAILED" in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("original", "broken"),
    [
        ('state="unhealthy"} > 0\n        for: 10m', 'state="unhealthy"} > 0\n        for: 5m'),
        (") >= 4", ") > 3"),
        ('state=~"idle|busy"', 'state=~"idle"'),
        ('up{job="repro-gate-runner"} == 0 or ', ""),
    ],
    ids=["unhealthy-for", "failures-threshold", "busy-slots-ignored", "target-down-dropped"],
)
def test_runner_unit_tests_catch_a_broken_rule(
    tmp_path: Path, original: str, broken: str
) -> None:
    # The runner service's alerts: a wrong duration, threshold, state or condition must fail.
    kit = tmp_path / "prometheus"
    shutil.copytree(PROMETHEUS_DIR, kit)
    rules = kit / "alert-rules.yml"
    text = rules.read_text(encoding="utf-8")
    assert text.count(original) == 1
    rules.write_text(text.replace(original, broken), encoding="utf-8")
    result = promtool("test", "rules", "tests/runner.test.yml", cwd=kit)
    assert result.returncode != 0
    assert "FAILED" in result.stdout + result.stderr


def test_runner_alerts_point_to_runbook_sections_that_exist() -> None:
    document = yaml.safe_load((PROMETHEUS_DIR / "alert-rules.yml").read_text("utf-8"))
    (group,) = [g for g in document["groups"] if g["name"] == "repro-gate-runner-alerts"]
    guide = (ROOT / "docs" / "runner.md").read_text(encoding="utf-8")
    headings = re.findall(r"^#{1,6} (.+)$", guide, flags=re.MULTILINE)
    anchors = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}
    names = set()
    for rule in group["rules"]:
        names.add(rule["alert"])
        annotations = rule["annotations"]
        assert annotations["summary"] and annotations["description"]
        path, _, anchor = annotations["runbook_url"].partition("#")
        assert path == "docs/runner.md" and anchor in anchors, annotations["runbook_url"]
    assert names == {"ReproGateRunnerSlotUnhealthy", "ReproGateRunnerRegistrationsFailing",
                     "ReproGateRunnerMetricsAbsent"}
