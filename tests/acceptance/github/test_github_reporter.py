"""GitHubReporter end to end against the fake API: check run, status, sticky comment, forks."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import pytest
from helpers.fake_github import Answer, FakeGitHub, Principal
from helpers.github_env import FAST, HEAD_SHA, PR_NUMBER, actions_environment, ops_in_workspace
from helpers.github_env import pull_request_payload as pr_payload

from repro_gate import validation
from repro_gate.config import ReportConfig
from repro_gate.publish.github.client import RetryPolicy
from repro_gate.publish.github.reporter import GitHubReporter
from repro_gate.render import markdown

RUN_URL = "https://github.com/octo-org/trainer/actions/runs/9876543210"
MARKER = "<!-- repro-gate:repro-gate -->"


def reporter_for(
    tmp_path: Path,
    github: FakeGitHub,
    settings: dict | None = None,
    gate: str = "repro-gate",
    policy: RetryPolicy = FAST,
    **env: Any,
) -> GitHubReporter:
    environ = actions_environment(tmp_path, github.base_url, **env)
    report = ReportConfig(**(settings or {}))
    return GitHubReporter.from_environment(gate, report, environ, policy=policy)


def assert_valid(section: dict, manifest: dict) -> None:
    assert validation.errors("reporting", section) == []
    assert validation.errors("manifest", {**manifest, "reporting": section}) == []


def test_check_run_in_progress_then_completed_with_60_annotations(
    tmp_path: Path, github: FakeGitHub, manifest: dict
) -> None:
    manifest["nondeterministic_ops"] += ops_in_workspace(tmp_path / "workspace", 60)
    reporter = reporter_for(tmp_path, github)
    reporter.started()
    section = reporter.finished(manifest)

    (create,) = github.requests_to("POST", "/check-runs$")
    assert create.body["status"] == "in_progress"
    assert create.body["head_sha"] == HEAD_SHA
    assert create.body["name"] == "repro-gate"
    assert create.body["details_url"] == RUN_URL
    complete, append = github.requests_to("PATCH", "/check-runs/")
    assert complete.body["conclusion"] == "failure"
    assert len(complete.body["output"]["annotations"]) == 50
    assert len(append.body["output"]["annotations"]) == 10
    assert "conclusion" not in append.body

    (run,) = github.check_runs.values()
    assert run["status"] == "completed"
    assert run["output"]["title"] == (
        "not reproducible · first divergence at step 3 (fc.weight +1 more)"
    )
    annotations = github.annotations[run["id"]]
    assert len(annotations) == 60  # the two ops outside the repository are not annotated
    assert {a["path"] for a in annotations} == {"src/model.py"}
    assert annotations[59]["start_line"] == 69
    # ops outside the repository are listed in the summary instead
    assert "modeling_utils.py:1204" in run["output"]["summary"]
    assert "fc.weight" in run["output"]["text"]

    assert section["ok"] is True
    assert section["check_run"] == {
        "outcome": "created",
        "id": run["id"],
        "url": run["html_url"],
        "annotations": 60,
        "conclusion": "failure",
    }
    assert section["status"]["outcome"] == "skipped"
    assert section["comment"]["outcome"] == "created"
    assert section["identity"] == "github-actions[bot]"
    assert github.statuses == []
    assert_valid(section, manifest)


@pytest.mark.parametrize("refusal", ["permission", "not_found"])
def test_commit_status_when_check_runs_cannot_be_written(
    tmp_path: Path, github: FakeGitHub, manifest: dict, refusal: str
) -> None:
    if refusal == "permission":
        github.tokens["ghs_actions"].can_write_checks = False
    else:  # e.g. a GHES without the checks API
        github.script("POST", "/check-runs$", Answer(404, body={"message": "Not Found"}))
    reporter = reporter_for(tmp_path, github)
    reporter.started()
    section = reporter.finished(manifest)

    assert len(github.requests_to("POST", "/check-runs$")) == 1  # not tried again at the end
    (status,) = github.statuses
    assert status["state"] == "failure"
    assert status["context"] == "repro-gate"
    assert status["sha"] == HEAD_SHA
    assert status["target_url"] == RUN_URL
    assert len(status["description"]) <= 140
    assert status["description"].startswith("not reproducible")
    assert section["check_run"]["outcome"] == "unavailable"
    assert section["status"]["outcome"] == "created"
    assert section["ok"] is True
    assert_valid(section, manifest)


def test_status_always_posts_pending_then_final(
    tmp_path: Path, github: FakeGitHub, manifest: dict
) -> None:
    manifest["verdict"], manifest["reasons"] = "pass", []
    manifest["comparison"]["first_divergence"] = None
    reporter = reporter_for(tmp_path, github, {"status": "always"}, gate="gpu-nightly")
    reporter.started()
    section = reporter.finished(manifest)
    assert [(s["state"], s["context"]) for s in github.statuses] == [
        ("pending", "gpu-nightly"),
        ("success", "gpu-nightly"),
    ]
    assert github.statuses[1]["description"] == (
        "bit-for-bit reproducible · determinism cost +7.4% (95% interval +5.1% to +9.8%)"
    )
    (run,) = github.check_runs.values()
    assert (run["name"], run["conclusion"]) == ("gpu-nightly", "success")
    (comment,) = github.comments[PR_NUMBER]
    assert comment["body"].rstrip().endswith("<!-- repro-gate:gpu-nightly -->")
    assert section["status"] == {
        "outcome": "created",
        "id": github.statuses[1]["id"],
        "state": "success",
    }


def test_error_verdict_uses_the_configured_conclusion(
    tmp_path: Path, github: FakeGitHub, manifest: dict
) -> None:
    manifest["verdict"] = "error"
    manifest["reasons"] = [{"code": "run_failed", "message": "det-2 exited with code 1"}]
    section = reporter_for(tmp_path, github, {"error_conclusion": "neutral"}).finished(manifest)
    (run,) = github.check_runs.values()
    assert (run["status"], run["conclusion"]) == ("completed", "neutral")
    assert run["output"]["title"] == "gate error · det-2 exited with code 1"
    assert section["check_run"]["conclusion"] == "neutral"


def test_sticky_comment_created_updated_then_left_alone(
    tmp_path: Path, github: FakeGitHub, manifest: dict
) -> None:
    # Someone copied our marker into their own comment: it must not be taken over.
    foreign = github.add_comment(PR_NUMBER, "contributor", f"look: {MARKER}")
    for i in range(120):  # push our comment onto the second page
        github.add_comment(PR_NUMBER, "reviewer", f"review note {i}")

    first = reporter_for(tmp_path, github).finished(manifest)
    assert first["comment"]["outcome"] == "created"
    ours = github.comments[PR_NUMBER][-1]
    assert ours["user"]["login"] == "github-actions[bot]"
    assert ours["body"].startswith("### ❌ repro-gate: not reproducible")
    assert ours["id"] == first["comment"]["id"]

    manifest["verdict"], manifest["reasons"] = "pass", []
    manifest["comparison"]["first_divergence"] = None
    second = reporter_for(tmp_path, github).finished(manifest)
    assert second["comment"] == {"outcome": "updated", "id": ours["id"], "url": ours["html_url"]}
    assert ours["body"].startswith("### ✅ repro-gate: bit-for-bit reproducible")

    third = reporter_for(tmp_path, github).finished(manifest)
    assert third["comment"]["outcome"] == "unchanged"
    assert len(github.requests_to("PATCH", "/issues/comments/")) == 1
    assert len(github.requests_to("POST", "/issues/.*/comments")) == 1
    assert foreign["body"] == f"look: {MARKER}"
    assert sum(MARKER in c["body"] for c in github.comments[PR_NUMBER]) == 2
    listing = github.requests_to("GET", "/issues/.*/comments")
    assert all(r.query.get("per_page") == "100" for r in listing)


def test_personal_token_identity_comes_from_the_status_creator(
    tmp_path: Path, github: FakeGitHub, manifest: dict
) -> None:
    github.tokens["ghp_person"] = Principal("octocat")  # no App: check runs are refused
    for _ in range(2):
        section = reporter_for(tmp_path, github, token="ghp_person").finished(manifest)
    assert section["identity"] == "octocat"
    assert section["check_run"]["outcome"] == "unavailable"
    assert section["comment"]["outcome"] == "unchanged"
    assert [c["user"]["login"] for c in github.comments[PR_NUMBER]] == ["octocat"]


def test_no_comment_outside_pull_requests(
    tmp_path: Path, github: FakeGitHub, manifest: dict
) -> None:
    section = reporter_for(tmp_path, github, event="push", payload={}).finished(manifest)
    assert section["comment"] == {"outcome": "skipped", "reason": "not a pull request"}
    (run,) = github.check_runs.values()
    assert run["head_sha"] != HEAD_SHA  # a push reports on GITHUB_SHA
    assert github.comments == {}


def test_fork_pull_request_defers_without_any_request(
    tmp_path: Path, github: FakeGitHub, manifest: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    reporter = reporter_for(tmp_path, github, payload=pr_payload(fork=True))
    reporter.started()
    section = reporter.finished(manifest)
    assert github.seen == []
    assert section["deferred"] is True and section["ok"] is True
    assert {section[c]["outcome"] for c in ("check_run", "status", "comment")} == {"deferred"}
    assert "workflow_run" in capsys.readouterr().err
    summary = markdown.summary_markdown({**manifest, "reporting": section})
    assert "posted by the trusted `workflow_run` job" in summary
    assert_valid(section, manifest)


def test_read_only_token_is_noticed_on_the_first_write(
    tmp_path: Path, github: FakeGitHub, manifest: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    github.tokens["ghs_actions"].can_write = False
    reporter = reporter_for(tmp_path, github)
    reporter.started()
    section = reporter.finished(manifest)
    assert section["deferred"] is True and section["ok"] is True
    assert section["reason"] == "the token is read-only (check run, commit status)"
    assert github.requests_to("POST", "/comments") == []  # no further writes once refused
    assert github.check_runs == {} and github.statuses == []
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert all(line.startswith("repro-gate: github: ") for line in err_lines)
    assert_valid(section, manifest)


def test_api_down_for_the_whole_run(tmp_path: Path, github: FakeGitHub, manifest: dict) -> None:
    github.down = True
    original = copy.deepcopy(manifest)
    policy = RetryPolicy(budget=1.0, request_timeout=0.5, base_delay=0.05, max_delay=0.2)
    reporter = reporter_for(tmp_path, github, policy=policy)
    started = time.monotonic()
    reporter.started()
    section = reporter.finished(manifest)
    assert time.monotonic() - started < 3.0  # two phases of at most 1 s each, plus slack
    assert manifest == original  # verdict and manifest untouched
    assert section["ok"] is False
    assert section["check_run"]["outcome"] == "failed"
    assert section["status"]["outcome"] == "skipped"  # the fallback is for 403/404, not outages
    assert section["comment"]["outcome"] == "failed"
    assert len(github.requests_to("POST", "/check-runs$")) >= 2  # tried again at the end
    assert section["errors"] and all("HTTP 503" in e or "budget" in e for e in section["errors"])
    assert_valid(section, manifest)


def test_inactive_outside_actions(tmp_path: Path, github: FakeGitHub, manifest: dict) -> None:
    environ = actions_environment(tmp_path, github.base_url)
    del environ["GITHUB_ACTIONS"]
    reporter = GitHubReporter.from_environment("repro-gate", ReportConfig(), environ, policy=FAST)
    reporter.started()
    section = reporter.finished(manifest)
    assert section == {"active": False, "ok": True, "reason": "not running in GitHub Actions"}
    assert github.seen == []
    environ = actions_environment(tmp_path, github.base_url, token="")
    reporter = GitHubReporter.from_environment("repro-gate", ReportConfig(), environ)
    section = reporter.finished(manifest)
    assert "no GitHub token" in section["reason"]
    assert_valid(section, manifest)


def test_huge_manifest_stays_under_github_limits(
    tmp_path: Path, github: FakeGitHub, manifest: dict
) -> None:
    artifact = manifest["comparison"]["artifacts"][0]
    artifact["tensors"] = [
        {**artifact["tensors"][0], "name": f"layers.{i}.attention.{'q' * 40}.weight"}
        for i in range(3000)
    ]
    manifest["comparison"]["artifacts"] = [
        {**artifact, "path": f"checkpoints/shard-{i:05d}-{'x' * 60}.safetensors"} for i in range(40)
    ]
    manifest["reasons"] = [{"code": "artifact_different", "message": "r" * 3000}] * 40
    section = reporter_for(tmp_path, github).finished(manifest)
    (run,) = github.check_runs.values()
    assert len(run["output"]["summary"]) <= 65_535 and len(run["output"]["text"]) <= 65_535
    assert "cut here" in run["output"]["text"]
    (comment,) = github.comments[PR_NUMBER]
    assert len(comment["body"]) <= 65_536
    assert comment["body"].rstrip().endswith(MARKER)
    assert section["ok"] is True


def test_read_only_token_noticed_on_the_comment_when_it_is_the_only_write(
    tmp_path: Path, github: FakeGitHub, manifest: dict
) -> None:
    github.tokens["ghs_actions"].can_write = False
    settings = {"check_run": False, "status": "never"}
    section = reporter_for(tmp_path, github, settings).finished(manifest)
    assert section["deferred"] is True and section["ok"] is True
    assert section["reason"] == "the token is read-only (comment)"
    assert len(github.requests_to("POST", "/comments")) == 1
    assert_valid(section, manifest)
