"""The gate commands are plain functions: called here in-process, without a subprocess or an
argparse namespace, they run the whole lifecycle (config, error record, lock, run, render). In
the action, everything a run influenced prints with workflow commands off."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.workflow_commands import commands_besides_windows, live_commands

from repro_gate import notices, validation
from repro_gate.cli.commands.check import check
from repro_gate.cli.commands.upgrade import upgrade
from repro_gate.cli.session import Output, Session
from repro_gate.cli.sinks import GroupedSinks, SinkFactory, notices_on_stdout
from repro_gate.config import Config
from repro_gate.errors import ErrorKind, GateError
from repro_gate.publish import actions
from repro_gate.upgrade import UpgradeRequest
from repro_gate.upgrade.check import CandidateSource, UpgradeOptions


def test_check_called_directly_runs_the_gate_and_prints_the_manifest(
    project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(project)
    overrides = {"command": [sys.executable, "deterministic.py"], "cost": {"enabled": False}}

    exit_code = check(None, overrides, Output(as_json=True, quiet=True))

    assert exit_code == 0
    printed = json.loads(capsys.readouterr().out)
    written = json.loads((project / "repro-gate-out" / "manifest.json").read_text())
    assert printed["verdict"] == written["verdict"] == "pass"
    assert validation.errors("manifest", written) == []


def test_check_called_directly_records_a_bad_config_and_raises_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    output_dir = tmp_path / "out"

    with pytest.raises(GateError) as raised:
        check(tmp_path / "missing.yml", {"output_dir": str(output_dir)})

    assert raised.value.kind is ErrorKind.CONFIG
    manifest = json.loads((output_dir / "manifest.json").read_text())
    assert manifest["verdict"] == "error"
    assert manifest["reasons"][0]["message"] == raised.value.message
    # The command raises; only cli/main.py prints the one-line error.
    assert "repro-gate: error:" not in capsys.readouterr().err


def test_upgrade_called_directly_records_its_error_in_upgrade_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no lock here: nothing to upgrade
    options = UpgradeOptions(CandidateSource(request=UpgradeRequest(())))

    exit_code = upgrade(None, {"command": "true", "output_dir": "out"}, options,
                        Output(quiet=True))

    assert exit_code == 2
    record = json.loads((tmp_path / "out" / "upgrade.json").read_text())
    assert validation.errors("upgrade", record) == []
    assert record["verdict"] == "error"



@dataclass(frozen=True)
class Finished:
    exit_code: int


def test_in_the_action_only_the_gates_own_commands_are_live(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    annotation = actions.annotation("error", "index_add_ is nondeterministic", title="repro-gate")

    def gate(sinks: SinkFactory) -> Finished:
        """What a gate prints: a run's output, a notice naming its file, the verdict's
        annotation (publish/actions.py)."""
        sinks("A")("::set-output name=verdict::pass")
        notices.warning("runs/A/x\n::notice::PASS leads outside the run directory")
        actions.emit(annotation)
        return Finished(exit_code=1)

    session = Session(warn=print, record_error=print, sinks=GroupedSinks(), environ={},
                      notices=notices_on_stdout)
    exit_code = session.run(Config(workdir=tmp_path, output_dir=tmp_path / "out"), gate,
                            lambda _: "repro-gate: FAIL\n  ::notice::a file the training named")

    assert exit_code == 1
    log = capsys.readouterr().out
    assert "  ::notice::a file the training named" in log.splitlines()
    assert commands_besides_windows(log) == ["::group::repro-gate run A", annotation,
                                             "::endgroup::"]
    assert not live_commands(log)[-1].startswith("::stop-commands::")  # the last window ends
