"""`repro-gate push`: what it refuses before sending anything, a push already done, and a push
to a closed loopback port reported as one error line with the command to retry."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from helpers.manifest_docs import load_current

from repro_gate.cli.commands.push import push
from repro_gate.cli.main import main
from repro_gate.errors import EXIT_ERROR, EXIT_PASS, ErrorKind, GateError
from repro_gate.publish.metrics.pushgateway import ENV_INPUT_URL, ENV_URL

CLOSED_PORT_URL = "http://127.0.0.1:9"


@pytest.fixture
def manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A failing gate's manifest, with no Pushgateway named by the environment."""
    monkeypatch.delenv(ENV_URL, raising=False)
    monkeypatch.delenv(ENV_INPUT_URL, raising=False)
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(load_current()))
    return path


def test_metrics_already_pushed_are_not_pushed_again(
    manifest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = json.loads(manifest.read_text())
    document["metrics"] = {
        "pushed": True, "counted": True, "url": CLOSED_PORT_URL, "job": "repro_gate",
        "grouping_key": {"repository": "octo-org/trainer", "gate": "train",
                         "runner_slot": "default"},
        "attempts": 1, "pushed_at": "2026-11-20T09:20:00Z"}
    manifest.write_text(json.dumps(document))

    assert push(manifest, url=CLOSED_PORT_URL) == EXIT_PASS
    assert capsys.readouterr().out == (f"repro-gate: metrics of {manifest} were already pushed;"
                                       " nothing to do\n")


@pytest.mark.parametrize("timeout", [0.0, -1.0, math.inf, math.nan])
def test_a_timeout_that_is_not_a_positive_finite_number_is_refused(
    manifest: Path, timeout: float
) -> None:
    with pytest.raises(GateError) as raised:
        push(manifest, url=CLOSED_PORT_URL, timeout=timeout)

    assert raised.value.kind is ErrorKind.METRICS_CONFIG
    assert raised.value.message.startswith("--metrics-timeout: must be a finite number > 0")


def test_no_pushgateway_anywhere_is_a_metrics_config_error(manifest: Path) -> None:
    with pytest.raises(GateError) as raised:
        push(manifest)

    assert raised.value.kind is ErrorKind.METRICS_CONFIG
    assert raised.value.message == ("no pushgateway configured: pass --pushgateway-url or set"
                                    " REPRO_GATE_PUSHGATEWAY_URL")


def test_a_failed_push_is_one_error_line_naming_the_retry(
    manifest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = manifest.read_text()

    code = main(["push", "--manifest", str(manifest), "--pushgateway-url", CLOSED_PORT_URL,
                 "--metrics-timeout", "0.5"])

    assert code == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith(f"repro-gate: error: metrics push to {CLOSED_PORT_URL}")
    assert "failed after" in err and "repro-gate push" in err
    assert manifest.read_text() == before  # nothing pushed: nothing recorded


def test_a_missing_manifest_is_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["push", "--manifest", str(tmp_path / "absent.json")]) == EXIT_ERROR

    err = capsys.readouterr().err
    assert err.startswith("repro-gate: error: ") and err.count("\n") == 1
