"""Publishing an upgrade check (publish/upgrade_report.py) against the validating fake GitHub
API and into the Actions step files: check run, sticky comment beside the gate's, outputs, summary.

The upgrade documents are built here in the shape the upgrade check writes and validated
against schemas/upgrade.schema.json before they are published.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from helpers.fake_github import FakeGitHub
from helpers.github_env import HEAD_SHA, PR_NUMBER, actions_environment, read_outputs

from repro_gate import config, publish, validation
from repro_gate.config import Config
from repro_gate.manifest.upgrade_document import validate_upgrade
from repro_gate.publish.upgrade_report import (
    check_name,
    comment_marker,
    outputs_for,
    publish_to_actions,
)
from repro_gate.render import markdown, markdown_upgrade

SHA = "cd" * 32
GATE_COMMENT = "✅ bit-for-bit reproducible\n\n" + markdown.comment_marker("train") + "\n"


def change(name: str, old: str, new: str, direct: bool = True) -> dict[str, Any]:
    return {"name": name, "old": old, "new": new, "kind": "upgraded", "direct": direct,
            "applies": True}


def gate_summary(verdict: str = "pass") -> dict[str, Any]:
    return {"verdict": verdict, "manifest": None, "reasons": [], "cost": None}


def culprit(name: str, group: int = 0) -> dict[str, Any]:
    return {"name": name, "old": "1.0", "new": "1.1", "kind": "upgraded", "group": group,
            "first_divergence": {"step": 1, "parameters": ["weight"], "loss_differs": True,
                                 "runs": ["baseline-A", "trial-1"]},
            "max_abs_diff": 0.25, "max_rel_diff": 0.5, "max_ulp_diff": 1000,
            "artifact": "model.pt: weight"}


def upgrade_document(verdict: str, output_dir: Path, culprits: tuple[str, ...] = ()
                     ) -> dict[str, Any]:
    """upgrade.json with numlib, harmless and leaf upgraded; `changed` names `culprits`."""
    document: dict[str, Any] = {
        "schema_version": 1,
        "tool": {"name": "repro-gate", "version": "0.9.0"},
        "gate": "train",
        "started_at": "2026-11-23T10:00:00+00:00",
        "finished_at": "2026-11-23T10:04:00+00:00",
        "verdict": verdict,
        "reasons": [],
        "output_dir": str(output_dir),
        "baseline": {"lock": "uv.lock", "format": "uv.lock", "sha256": SHA, "environment": None},
        "candidate": {"lock": "uv.lock", "format": "uv.lock", "sha256": SHA, "source": "given",
                      "upgrade": [], "environment": None},
        "changes": [change("numlib", "1.0", "1.1"), change("harmless", "1.0", "1.1"),
                    change("leaf", "1.0", "1.1", direct=False)],
        "numerics": {"status": "same", "tolerance": "bitwise", "comparison": {
            "basis": "bitwise", "first_divergence": None, "artifacts": [],
            "trajectory": {"steps_compared": 6, "status": "equal"}}},
        "reproducibility": {"baseline": gate_summary(), "candidate": gate_summary(),
                            "new_nondeterministic_ops": []},
        "culprits": [],
        "culprit_search": {"status": "not_needed", "runs": 0, "max_runs": 32, "trials": []},
        "bisect_runs": 0,
        "fingerprint_diff": None,
        "runs": [],
    }
    if verdict == "changed":
        document["reasons"] = [{"code": "numerics_changed", "message": "differ from step 1"}]
        document["numerics"]["status"] = "changed"
        document["culprits"] = [culprit(name, group) for group, name in enumerate(culprits)]
        trials = [{"packages": [name], "outcome": "changed", "step": 1} for name in culprits]
        document["culprit_search"] = {"status": "found", "runs": len(trials), "max_runs": 32,
                                      "trials": trials}
        document["bisect_runs"] = len(trials)
    elif verdict == "not_reproducible":
        document["reasons"] = [{"code": "candidate_not_reproducible", "message": "runs differ"}]
        document["reproducibility"]["candidate"] = gate_summary("fail")
    elif verdict == "error":
        document["reasons"] = [{"code": "lockfile", "message": "no lockfile in the workdir"}]
    validate_upgrade(document)
    return document


def step_environment(tmp_path: Path, api_url: str) -> dict[str, str]:
    environ = actions_environment(tmp_path, api_url)
    environ["GITHUB_OUTPUT"] = str(tmp_path / "output")
    environ["GITHUB_STEP_SUMMARY"] = str(tmp_path / "summary.md")
    return environ


def gate_config(tmp_path: Path, timeout: float = 10) -> Config:
    return config.load(None, {"name": "train", "report": {"timeout": timeout}}, tmp_path)


def published(tmp_path: Path, environ: dict[str, str], document: dict[str, Any]
              ) -> dict[str, Any]:
    """Publish as the upgrade check does: started, then finished with upgrade.json's path."""
    publisher = publish.for_upgrade(gate_config(tmp_path), environ)
    publisher.started()
    sections = publisher.finished(copy.deepcopy(document), tmp_path / "out" / "upgrade.json")
    validate_upgrade({**document, **sections})  # the second write keeps the report valid
    return sections


def test_changed_then_same_one_check_run_each_and_one_comment_beside_the_gates(
    tmp_path: Path, github: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    environ = step_environment(tmp_path, github.base_url)
    gate_comment = github.add_comment(PR_NUMBER, "github-actions[bot]", GATE_COMMENT)
    changed = upgrade_document("changed", tmp_path / "out", culprits=("numlib",))

    first = published(tmp_path, environ, changed)

    (create,) = github.requests_to("POST", "/check-runs$")
    assert (create.body["name"], create.body["status"]) == ("repro-gate upgrade / train",
                                                            "in_progress")
    assert create.body["head_sha"] == HEAD_SHA
    (run,) = github.check_runs.values()
    assert (run["status"], run["conclusion"]) == ("completed", "failure")
    assert run["output"]["title"] == markdown_upgrade.title(changed)
    assert "numlib" in run["output"]["summary"]
    assert validation.errors("reporting", first["reporting"]) == []
    assert first["reporting"]["ok"] is True
    assert first["reporting"]["check_run"]["conclusion"] == "failure"
    assert first["reporting"]["comment"]["outcome"] == "created"
    gates, upgrades = github.comments[PR_NUMBER]
    assert gates["body"] == gate_comment["body"]
    assert upgrades["body"].endswith(comment_marker("train") + "\n")
    assert "numerics changed" in upgrades["body"].splitlines()[0]
    assert "| `numlib` 1.0 -\\> 1.1 | step 1" in upgrades["body"]  # the culprits' table
    assert markdown.comment_marker("train") not in upgrades["body"]
    assert "::error title=repro-gate upgrade%3A numerics changed::" in capsys.readouterr().out

    same = upgrade_document("same", tmp_path / "out")
    second = published(tmp_path, environ, same)

    assert len(github.check_runs) == 2  # one check run per upgrade check, as for the gate
    latest = github.check_runs[max(github.check_runs)]
    assert (latest["name"], latest["conclusion"]) == (check_name("train"), "success")
    assert second["reporting"]["comment"] == {
        "outcome": "updated", "id": upgrades["id"], "url": upgrades["html_url"]}
    assert [c["id"] for c in github.comments[PR_NUMBER]] == [gates["id"], upgrades["id"]]
    assert github.comments[PR_NUMBER][0]["body"] == gate_comment["body"]  # left alone
    assert "numerics kept" in github.comments[PR_NUMBER][1]["body"].splitlines()[0]
    assert "::error" not in capsys.readouterr().out


def test_the_gate_keeps_its_own_comment_when_it_runs_after_the_upgrade_check(
    tmp_path: Path, github: FakeGitHub, manifest: dict[str, Any]
) -> None:
    environ = step_environment(tmp_path, github.base_url)
    published(tmp_path, environ, upgrade_document("same", tmp_path / "out"))

    gate = publish.for_gate(gate_config(tmp_path), environ)
    gate.started()
    section = gate.finished({**manifest, "gate": "train"}, tmp_path / "manifest.json")

    assert section["reporting"]["comment"]["outcome"] == "created"  # not the upgrade's comment
    upgrade_comment, gate_comment = github.comments[PR_NUMBER]
    assert comment_marker("train") in upgrade_comment["body"]
    assert markdown.comment_marker("train") in gate_comment["body"]
    assert sorted(run["name"] for run in github.check_runs.values()) == [
        "repro-gate upgrade / train", "train"]


def test_step_outputs_and_job_summary(tmp_path: Path, github: FakeGitHub) -> None:
    environ = step_environment(tmp_path, github.base_url)
    document = upgrade_document("changed", tmp_path / "out", culprits=("numlib", "harmless"))

    published(tmp_path, environ, document)

    assert read_outputs(tmp_path / "output") == {
        "verdict": "fail",
        "upgrade-verdict": "changed",
        "upgrade-report": str(tmp_path / "out" / "upgrade.json"),
        "culprits": "numlib,harmless",
    }
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert summary.splitlines()[0].startswith("### ❌ train upgrade: numerics changed · numlib")
    assert "| `harmless` 1.0 -\\> 1.1 |" in summary


@pytest.mark.parametrize(("verdict", "expected"), [
    ("same", "pass"), ("changed", "fail"), ("not_reproducible", "fail"), ("error", "error")])
def test_the_upgrade_verdict_maps_onto_the_documented_verdict_output(
    tmp_path: Path, verdict: str, expected: str
) -> None:
    environ = {"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(tmp_path / "output"),
               "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    document = upgrade_document(verdict, tmp_path, culprits=("numlib",))

    publish_to_actions(document, None, environ)

    outputs = read_outputs(tmp_path / "output")
    assert (outputs["verdict"], outputs["upgrade-verdict"]) == (expected, verdict)
    assert outputs["culprits"] == ("numlib" if verdict == "changed" else "")
    assert outputs == outputs_for(document, None)


def test_github_down_is_a_warning_and_the_step_still_gets_its_outputs(
    tmp_path: Path, github: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    github.down = True
    environ = step_environment(tmp_path, github.base_url)
    document = upgrade_document("same", tmp_path / "out")
    publisher = publish.for_upgrade(gate_config(tmp_path, timeout=1), environ)

    publisher.started()
    sections = publisher.finished(copy.deepcopy(document), None)

    assert sections["reporting"]["ok"] is False and sections["reporting"]["errors"]
    validate_upgrade({**document, **sections})
    captured = capsys.readouterr()
    assert "::warning::repro-gate: github: the upgrade report was not posted" in captured.out
    assert read_outputs(tmp_path / "output")["verdict"] == "pass"
    assert document["verdict"] == "same"


def test_outside_actions_nothing_is_published(tmp_path: Path) -> None:
    document = upgrade_document("changed", tmp_path, culprits=("numlib",))

    sections = publish.for_upgrade(gate_config(tmp_path), {}).finished(document, None)

    assert sections == {"reporting": {"active": False, "ok": True,
                                      "reason": "not running in GitHub Actions"}}
    assert list(tmp_path.iterdir()) == []
