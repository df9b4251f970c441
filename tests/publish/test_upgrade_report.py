"""Publishing an upgrade check to the Actions step: its names and marker, the step outputs,
the job summary and the annotation, from documents valid against the upgrade schema."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from helpers.github_env import read_outputs

from repro_gate import validation
from repro_gate.config import ReportConfig
from repro_gate.publish import upgrade_report
from repro_gate.publish.github.reporter import GitHubReporter
from repro_gate.render import markdown
from repro_gate.render.markdown import COMMENT_LIMIT

SHA = "cd" * 32


def change(name: str, old: str, new: str) -> dict[str, Any]:
    return {"name": name, "old": old, "new": new, "kind": "upgraded", "direct": True,
            "applies": True}


def run(name: str, environment: str) -> dict[str, Any]:
    return {"name": name, "mode": "deterministic", "exit_code": 0, "wall_seconds": 1.0,
            "steps": 4, "log_path": f"logs/{name}.log", "run_dir": f"runs/{name}",
            "artifacts": [], "timed_out": False, "stopped": None, "launcher": "local",
            "environment": environment}


def culprit(name: str, group: int) -> dict[str, Any]:
    return {"name": name, "old": "1.0", "new": "1.1", "kind": "upgraded", "group": group,
            "first_divergence": {"step": 2, "parameters": ["fc.weight"], "loss_differs": True,
                                 "runs": ["baseline-A", "trial-1"], "cause": "optimizer"},
            "max_abs_diff": 0.25, "max_rel_diff": 0.01, "max_ulp_diff": 9,
            "artifact": "model.pt: fc.weight"}


def document(verdict: str = "same", **fields: Any) -> dict[str, Any]:
    """A valid upgrade.json of gate `train`; `fields` replace top-level fields."""
    gate_summary = {"verdict": "pass", "manifest": None, "reasons": [],
                    "cost": {"status": "inconclusive", "pct": None, "ci95_pct": None}}
    built: dict[str, Any] = {
        "schema_version": 1,
        "tool": {"name": "repro-gate", "version": "0.9.0"},
        "gate": "train",
        "started_at": "2026-11-23T10:00:00+00:00",
        "finished_at": "2026-11-23T10:05:00+00:00",
        "verdict": verdict,
        "reasons": [],
        "output_dir": "out",
        "baseline": {"lock": "uv.lock", "format": "uv.lock", "sha256": SHA, "environment": None},
        "candidate": {"lock": "out/upgrade/candidate.uv.lock", "format": "uv.lock",
                      "sha256": SHA, "source": "computed", "upgrade": [], "environment": None},
        "changes": [change("mathlib", "1.0", "1.1"), change("helperlib", "2.0", "2.1")],
        "numerics": {"status": "same", "tolerance": "bitwise", "comparison": {
            "basis": "bitwise", "first_divergence": None,
            "trajectory": {"steps_compared": 4, "status": "equal"}, "artifacts": []}},
        "reproducibility": {"baseline": gate_summary, "candidate": gate_summary,
                            "new_nondeterministic_ops": []},
        "culprits": [],
        "culprit_search": {"status": "not_needed", "runs": 0, "max_runs": 32, "trials": []},
        "bisect_runs": 0,
        "fingerprint_diff": None,
        "runs": [run("baseline-A", "baseline"), run("candidate-A", "candidate")],
    }
    built.update(fields)
    assert validation.errors("upgrade", built) == []
    return built


def changed() -> dict[str, Any]:
    return document(
        "changed",
        reasons=[{"code": "numerics_changed", "message": "the numerics changed at step 2"}],
        numerics={"status": "changed", "tolerance": "bitwise", "comparison": None},
        culprits=[culprit("mathlib", 0), culprit("helperlib", 0)],
        culprit_search={"status": "found", "runs": 3, "max_runs": 32, "trials": []},
        bisect_runs=3)


def actions_environ(tmp_path: Path) -> dict[str, str]:
    return {"GITHUB_ACTIONS": "true", "GITHUB_OUTPUT": str(tmp_path / "output"),
            "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}


def test_the_check_and_the_comment_are_told_apart_from_the_gates_own() -> None:
    assert upgrade_report.check_name("train") == "repro-gate upgrade / train"
    marker = upgrade_report.comment_marker("train")
    assert marker == "<!-- repro-gate-upgrade:train -->"
    assert markdown.comment_marker("train") not in marker


def test_the_upgrade_verdict_maps_to_the_workflows_verdict() -> None:
    assert upgrade_report.gate_verdict(document("same")) == "pass"
    assert upgrade_report.gate_verdict(changed()) == "fail"
    assert upgrade_report.gate_verdict({"verdict": "sideways"}) == "error"
    assert upgrade_report.gate_verdict({}) == "error"


def test_the_outputs_name_each_culprit_once() -> None:
    outputs = upgrade_report.outputs_for(changed(), Path("out/upgrade.json"))
    assert outputs == {"verdict": "fail", "upgrade-verdict": "changed",
                       "upgrade-report": "out/upgrade.json", "culprits": "mathlib,helperlib"}
    assert upgrade_report.outputs_for(document(), None)["upgrade-report"] == ""
    assert upgrade_report.outputs_for(document(), None)["culprits"] == ""


def test_only_a_numerics_change_is_an_error_annotation() -> None:
    assert upgrade_report.changed_annotations(document("same")) == []
    (line,) = upgrade_report.changed_annotations(changed())
    assert line.startswith("::error title=repro-gate upgrade%3A numerics changed::")
    assert line.endswith("numerics changed · mathlib 1.0 -> 1.1 + helperlib 1.0 -> 1.1 (step 2)")


def test_the_comment_ends_with_its_marker_within_githubs_limit() -> None:
    huge = changed()
    huge["reasons"] = [{"code": "numerics_changed", "message": "x" * 390}] * 400
    for source in (changed(), huge):
        text = upgrade_report.comment(source)
        assert text.endswith("\n<!-- repro-gate-upgrade:train -->\n")
        assert len(text) <= COMMENT_LIMIT


def test_the_step_gets_outputs_summary_and_annotation(tmp_path: Path) -> None:
    environ = actions_environ(tmp_path)
    stream = io.StringIO()
    upgrade_report.publish_to_actions(changed(), Path("out/upgrade.json"), environ, stream)
    assert read_outputs(tmp_path / "output") == {
        "verdict": "fail", "upgrade-verdict": "changed", "upgrade-report": "out/upgrade.json",
        "culprits": "mathlib,helperlib"}
    summary = (tmp_path / "summary.md").read_text(encoding="utf-8")
    assert summary == upgrade_report.report(changed())
    assert stream.getvalue().startswith("::error title=repro-gate upgrade%3A numerics changed::")


def test_outside_actions_nothing_is_written(tmp_path: Path) -> None:
    environ = {**actions_environ(tmp_path), "GITHUB_ACTIONS": "false"}
    upgrade_report.publish_to_actions(changed(), None, environ, io.StringIO())
    assert list(tmp_path.iterdir()) == []


def test_a_step_that_cannot_be_written_is_a_warning_only(tmp_path: Path) -> None:
    environ = {**actions_environ(tmp_path), "GITHUB_OUTPUT": str(tmp_path / "missing" / "out")}
    stream = io.StringIO()
    upgrade_report.publish_to_actions(document(), None, environ, stream)
    assert stream.getvalue().startswith("::warning::repro-gate: could not publish to Actions: ")
    assert (tmp_path / "summary.md").is_file()  # the next part still ran


def test_an_inactive_reporter_records_why_and_the_step_is_still_published(
    tmp_path: Path,
) -> None:
    environ = actions_environ(tmp_path)  # in Actions, but no token
    reporter = GitHubReporter.from_environment("train", ReportConfig(), environ,
                                               rendering=upgrade_report.UPGRADE_RENDERING)
    publisher = upgrade_report.UpgradePublisher(reporter, environ)
    publisher.started()
    sections = publisher.finished(document(), None)
    assert sections == {"reporting": {
        "active": False, "ok": True,
        "reason": "no GitHub token (input github-token or GITHUB_TOKEN)"}}
    assert (tmp_path / "summary.md").read_text(encoding="utf-8").startswith("### ✅ train upgrade")


def test_a_configuration_error_publishes_to_the_step_only(tmp_path: Path) -> None:
    publisher = upgrade_report.for_upgrade_configuration_error(actions_environ(tmp_path))
    assert publisher.github is None
    assert publisher.finished(document(), None) == {}
    assert read_outputs(tmp_path / "output")["upgrade-verdict"] == "same"
