"""The action's outputs for `actions/attest` (input `attest: true`): run A's files of the
subjects and the predicate, relative to the workspace; none unless asked; empty after an error."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.attestation_docs import gate_document, write_gate
from helpers.github_env import read_outputs

from repro_gate.attestation.predicate import PREDICATE_TYPE
from repro_gate.errors import ConfigError
from repro_gate.publish import actions, attest_outputs


def actions_env(tmp_path: Path, workspace: Path, attest: str) -> dict[str, str]:
    return {"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(tmp_path / "output"),
            "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"), "GITHUB_WORKSPACE": str(workspace),
            "INPUT_ATTEST": attest}


def test_attest_true_names_the_files_for_actions_attest(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    gate = write_gate(workspace / "repro-gate-out")
    environ = actions_env(tmp_path, workspace, "true")

    actions.publish(gate_document(gate.output_dir), environ)

    outputs = read_outputs(tmp_path / "output")
    assert outputs["subject-path"] == ("repro-gate-out/runs/det-1/work/model.bin\n"
                                       "repro-gate-out/runs/det-1/metrics.json")
    assert outputs["predicate-type"] == PREDICATE_TYPE
    assert outputs["predicate-path"] == "repro-gate-out/predicate.json"
    assert outputs["verdict"] == "pass"


def test_a_file_changed_since_the_gate_is_left_out(tmp_path: Path) -> None:
    gate = write_gate(tmp_path / "repro-gate-out")
    gate.model.write_bytes(b"another model")

    outputs = attest_outputs.outputs_for(gate_document(gate.output_dir),
                                         actions_env(tmp_path, tmp_path, "true"))

    assert outputs["subject-path"] == "repro-gate-out/runs/det-1/metrics.json"


def test_no_outputs_unless_asked_and_empty_ones_after_an_error(tmp_path: Path) -> None:
    gate = write_gate(tmp_path / "repro-gate-out")
    document = gate_document(gate.output_dir)
    errored = {**document, "verdict": "error"}

    assert attest_outputs.outputs_for(document, actions_env(tmp_path, tmp_path, "")) == {}
    assert attest_outputs.outputs_for(document, actions_env(tmp_path, tmp_path, "false")) == {}
    assert attest_outputs.outputs_for(errored, actions_env(tmp_path, tmp_path, "true")) == {
        "subject-path": "", "predicate-type": "", "predicate-path": ""}


def test_another_value_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="input attest: must be true or false, got 'yes'"):
        attest_outputs.requested(actions_env(tmp_path, tmp_path, "yes"))
