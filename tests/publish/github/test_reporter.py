"""Reporting a gate run to GitHub: the check run, the fallback commit status and the sticky
comment, whose author is learned from our own writes; a fork's read-only token defers it all.

Every request goes to the local fake API (tests/helpers/fake_github.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.fake_github import FakeGitHub, Principal
from helpers.github_env import (
    FAST,
    HEAD_SHA,
    PR_NUMBER,
    actions_environment,
    ops_in_workspace,
    pull_request_payload,
)

from repro_gate.config import ReportConfig
from repro_gate.publish.github.client import GitHubClient
from repro_gate.publish.github.event import context_from_environment
from repro_gate.publish.github.rendering import as_posted
from repro_gate.publish.github.reporter import GitHubReporter, token_from_environment
from repro_gate.render import markdown


def reporter_for(github: FakeGitHub, environ: dict[str, str],
                 settings: ReportConfig | None = None) -> GitHubReporter:
    return GitHubReporter.from_environment("repro-gate", settings or ReportConfig(), environ,
                                           policy=FAST)


def test_the_action_input_token_wins_over_github_token() -> None:
    assert token_from_environment({"INPUT_GITHUB-TOKEN": "a", "GITHUB_TOKEN": "b"}) == "a"
    assert token_from_environment({"INPUT_GITHUB-TOKEN": "", "GITHUB_TOKEN": "b"}) == "b"
    assert token_from_environment({}) is None


def test_the_posted_manifest_links_its_run_and_is_no_longer_deferred() -> None:
    posted = as_posted({"verdict": "pass", "reporting": {"deferred": True}}, "https://run")
    assert posted == {"verdict": "pass", "reporting": {"run_url": "https://run",
                                                       "deferred": False}}


@pytest.mark.parametrize(("change", "reason"), [
    ({"GITHUB_ACTIONS": "false"}, "not running in GitHub Actions"),
    ({"INPUT_GITHUB-TOKEN": ""}, "no GitHub token (input github-token or GITHUB_TOKEN)"),
])
def test_outside_actions_or_without_a_token_nothing_is_sent(
    tmp_path: Path, github: FakeGitHub, change: dict[str, str], reason: str,
    manifest: dict[str, Any],
) -> None:
    reporter = reporter_for(github, {**actions_environment(tmp_path, github.base_url), **change})
    reporter.started()
    assert not reporter.active
    assert reporter.finished(manifest) == {"active": False, "ok": True, "reason": reason}
    assert github.seen == []


def test_reporting_disabled_in_the_configuration(tmp_path: Path, github: FakeGitHub) -> None:
    reporter = reporter_for(github, actions_environment(tmp_path, github.base_url),
                            ReportConfig(enabled=False))
    assert reporter.inactive_reason == "reporting disabled in the configuration"


def test_a_context_without_a_commit_is_inactive(tmp_path: Path, github: FakeGitHub) -> None:
    environ = actions_environment(tmp_path, github.base_url, event="push", payload={})
    del environ["GITHUB_SHA"]
    reporter = reporter_for(github, environ)
    assert reporter.inactive_reason == "no commit SHA (GITHUB_SHA or the event payload)"


def test_a_pull_request_gets_a_check_run_and_a_sticky_comment(
    tmp_path: Path, github: FakeGitHub, manifest: dict[str, Any],
) -> None:
    environ = actions_environment(tmp_path, github.base_url)
    manifest["nondeterministic_ops"] = ops_in_workspace(Path(environ["GITHUB_WORKSPACE"]), 3)
    reporter = reporter_for(github, environ)
    reporter.started()
    (run,) = github.check_runs.values()
    assert (run["status"], run["head_sha"]) == ("in_progress", HEAD_SHA)

    section = reporter.finished(manifest)
    assert section["ok"] is True and section["errors"] == []
    assert section["check_run"] == {"outcome": "created", "id": run["id"],
                                    "url": run["html_url"], "annotations": 3,
                                    "conclusion": "failure"}
    assert section["status"]["outcome"] == "skipped"  # the check run carries the result
    assert section["identity"] == "github-actions[bot]"  # the check run's App, as a bot
    assert section["comment"]["outcome"] == "created"
    assert (run["status"], run["conclusion"]) == ("completed", "failure")
    assert run["output"]["title"] == markdown.title(manifest)
    (comment,) = github.comments[PR_NUMBER]
    assert markdown.comment_marker("repro-gate") in comment["body"]
    assert github.statuses == []


def test_a_second_report_updates_the_same_comment(
    tmp_path: Path, github: FakeGitHub, manifest: dict[str, Any],
) -> None:
    environ = actions_environment(tmp_path, github.base_url)
    reporter_for(github, environ).finished(manifest)
    manifest["verdict"] = "pass"
    section = reporter_for(github, environ).finished(manifest)
    assert section["comment"]["outcome"] == "updated"
    assert len(github.comments[PR_NUMBER]) == 1
    assert [r["conclusion"] for r in github.check_runs.values()] == ["failure", "success"]


def test_without_check_runs_a_status_stands_in_and_names_the_commenter(
    tmp_path: Path, github: FakeGitHub, manifest: dict[str, Any],
) -> None:
    github.tokens["ghp_person"] = Principal("octocat")  # a personal token: no App
    environ = actions_environment(tmp_path, github.base_url, token="ghp_person")
    section = reporter_for(github, environ).finished(manifest)
    assert section["check_run"]["outcome"] == "unavailable"
    assert section["status"]["outcome"] == "created" and section["status"]["state"] == "failure"
    assert section["identity"] == "octocat"
    assert github.comments[PR_NUMBER][0]["user"]["login"] == "octocat"
    (status,) = github.statuses
    assert status["description"] == markdown.title(manifest)[:140]


def test_a_fork_pull_request_is_deferred_without_a_request(
    tmp_path: Path, github: FakeGitHub, manifest: dict[str, Any],
) -> None:
    environ = actions_environment(tmp_path, github.base_url,
                                  payload=pull_request_payload(fork=True))
    reporter = reporter_for(github, environ)
    reporter.started()
    section = reporter.finished(manifest)
    assert section["deferred"] is True and section["ok"] is True
    assert section["comment"] == {
        "outcome": "deferred", "reason": "pull request from a fork: the token is read-only"}
    assert github.seen == []


def test_a_token_refused_everywhere_defers_to_the_trusted_job(
    tmp_path: Path, github: FakeGitHub, manifest: dict[str, Any],
) -> None:
    github.tokens["ghs_actions"] = Principal("github-actions[bot]", "github-actions",
                                             can_write=False, can_write_checks=False)
    section = reporter_for(github, actions_environment(tmp_path, github.base_url)).finished(
        manifest)
    assert section["deferred"] is True
    assert section["reason"] == "the token is read-only (check run, commit status)"
    assert github.check_runs == {} and github.statuses == [] and github.comments == {}


def test_an_error_verdict_takes_the_configured_conclusion(
    tmp_path: Path, github: FakeGitHub, manifest: dict[str, Any],
) -> None:
    manifest["verdict"] = "error"
    settings = ReportConfig(error_conclusion="neutral", comment=False)
    section = reporter_for(github, actions_environment(tmp_path, github.base_url),
                           settings).finished(manifest)
    assert section["check_run"]["conclusion"] == "neutral"
    assert section["comment"] == {"outcome": "disabled"}
    assert github.comments == {}


def test_an_explicit_context_reports_where_it_is_told(
    tmp_path: Path, github: FakeGitHub, manifest: dict[str, Any],
) -> None:
    environ = actions_environment(tmp_path, github.base_url, event="push", payload={})
    context = context_from_environment(environ)
    settings = ReportConfig(status="always")
    reporter = GitHubReporter.for_context("train", settings, context,
                                          GitHubClient(github.base_url, "ghs_actions",
                                                       policy=FAST))
    section = reporter.finished(manifest)
    assert section["comment"] == {"outcome": "skipped", "reason": "not a pull request"}
    assert section["status"]["outcome"] == "created"
    assert [s["context"] for s in github.statuses] == ["train"]
