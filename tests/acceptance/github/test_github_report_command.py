"""`repro-gate report --manifest` through the real CLI against the fake API."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.fake_github import Answer, FakeGitHub
from helpers.gate_cli import check, script
from helpers.github_env import HEAD_SHA, actions_environment

from repro_gate import validation
from repro_gate.render import markdown

OTHER_SHA = "f" * 40


def write_manifest(tmp_path: Path, manifest: dict[str, Any]) -> Path:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(manifest), encoding="utf-8")
    return path


def repro_gate(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run the console entry point in a fresh process with exactly this environment."""
    base = {"PATH": "/usr/bin:/bin", "PYTHONIOENCODING": "utf-8"}
    if "PYTHONPATH" in os.environ:  # the checkout under test, when it is not installed
        base["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return subprocess.run(
        [sys.executable, "-m", "repro_gate", "report", *args, "--timeout", "5"],
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def workflow_run_env(tmp_path: Path, github: FakeGitHub) -> dict[str, str]:
    payload = {
        "action": "completed",
        "workflow_run": {
            "id": 30433642,
            "event": "pull_request",
            "head_sha": HEAD_SHA,
            "pull_requests": [{"number": 7, "head": {"sha": HEAD_SHA}}],
        },
    }
    env = actions_environment(tmp_path, github.base_url, event="workflow_run", payload=payload)
    env.pop("INPUT_GITHUB-TOKEN")
    env["GITHUB_TOKEN"] = "ghs_actions"
    return env


def test_workflow_run_posts_the_manifest_of_a_fork_job(
    tmp_path: Path, github: FakeGitHub, manifest: dict[str, Any]
) -> None:
    # What the fork's pull_request job recorded: nothing posted, results deferred.
    manifest["reporting"] = {
        "active": True,
        "ok": True,
        "deferred": True,
        "reason": "pull request from a fork: the token is read-only",
    }
    path = write_manifest(tmp_path, manifest)
    result = repro_gate(workflow_run_env(tmp_path, github), "--manifest", str(path))

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        f"repro-gate: reported octo-org/trainer@{HEAD_SHA[:12]}:"
        " check run created, status skipped, comment created"
    )
    (run,) = github.check_runs.values()
    assert (run["head_sha"], run["conclusion"]) == (HEAD_SHA, "failure")
    assert "read-only" not in run["output"]["summary"]  # the trusted job posts the real thing
    (comment,) = github.comments[7]
    assert comment["body"].startswith("### ❌ repro-gate: not reproducible")
    updated = json.loads(path.read_text(encoding="utf-8"))
    assert updated["verdict"] == "fail"
    assert updated["reporting"]["comment"]["id"] == comment["id"]
    assert updated["reporting"]["deferred"] is False
    assert validation.errors("manifest", updated) == []


def test_flags_choose_repository_commit_and_pull_request(
    tmp_path: Path, github: FakeGitHub, manifest: dict[str, Any]
) -> None:
    path = write_manifest(tmp_path, manifest)
    env = actions_environment(tmp_path, github.base_url, event="push", payload={})
    args = ["--manifest", str(path), "--sha", OTHER_SHA, "--pr", "9", "--repo", "octo-org/other"]
    result = repro_gate(env, *args)
    assert result.returncode == 0, result.stderr
    (create,) = github.requests_to("POST", "/check-runs$")
    assert create.path == "/repos/octo-org/other/check-runs"
    assert create.body["head_sha"] == OTHER_SHA
    assert create.body["status"] == "completed"
    assert [c["issue_url"].rsplit("/", 1)[1] for c in github.comments[9]] == ["9"]


def test_reporting_failure_exits_2_and_keeps_the_manifest(
    tmp_path: Path, github: FakeGitHub, manifest: dict[str, Any]
) -> None:
    github.script("POST", "/check-runs$", Answer(422, body={"message": "Validation Failed"}))
    path = write_manifest(tmp_path, manifest)
    result = repro_gate(workflow_run_env(tmp_path, github), "--manifest", str(path))
    assert result.returncode == 2
    assert "check run failed: POST /repos/octo-org/trainer/check-runs: HTTP 422" in result.stderr
    updated = json.loads(path.read_text(encoding="utf-8"))
    assert updated["verdict"] == "fail"
    assert updated["reporting"]["ok"] is False
    assert updated["reporting"]["check_run"]["outcome"] == "failed"
    assert len(github.requests_to("POST", "/check-runs$")) == 1  # a 422 is never retried


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        (None, [], "manifest not found"),
        ("{oops", [], "not valid JSON (line 1)"),
        ('{"verdict": "pass"}', [], "not a repro-gate manifest (no schema_version)"),
        ('{"schema_version": 2}', [], "not a valid manifest: "),
        ("valid", ["--repo", "not-a-repo"], "--repo must be OWNER/NAME"),
        ("valid", ["--sha", "main"], "--sha must be a full commit SHA"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path,
    github: FakeGitHub,
    manifest: dict[str, Any],
    content: str | None,
    extra: list[str],
    message: str,
) -> None:
    path = tmp_path / "manifest.json"
    if content == "valid":
        write_manifest(tmp_path, manifest)
    elif content is not None:
        path.write_text(content, encoding="utf-8")
    result = repro_gate(workflow_run_env(tmp_path, github), "--manifest", str(path), *extra)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("repro-gate: error: ") and message in result.stderr
    assert github.seen == []


def test_no_token_is_bad_input(
    tmp_path: Path, github: FakeGitHub, manifest: dict[str, Any]
) -> None:
    env = workflow_run_env(tmp_path, github)
    env.pop("GITHUB_TOKEN")
    result = repro_gate(env, "--manifest", str(write_manifest(tmp_path, manifest)))
    assert result.returncode == 2
    assert "no GitHub token" in result.stderr


def fork_workflow_run_env(tmp_path: Path, github: FakeGitHub) -> dict[str, str]:
    """A `workflow_run` of a fork's pull request: GitHub lists no pull request in it."""
    env = workflow_run_env(tmp_path, github)
    payload = json.loads(Path(env["GITHUB_EVENT_PATH"]).read_text(encoding="utf-8"))
    payload["workflow_run"].update(
        pull_requests=[],
        head_branch="faster-loader",
        head_repository={"full_name": "contributor/trainer", "owner": {"login": "contributor"}},
    )
    Path(env["GITHUB_EVENT_PATH"]).write_text(json.dumps(payload), encoding="utf-8")
    return env


def test_a_forks_pull_request_is_found_by_its_head(
    tmp_path: Path, github: FakeGitHub, manifest: dict[str, Any]
) -> None:
    github.add_pull(41, "octo-org:faster-loader", OTHER_SHA)  # same branch name, not the fork's
    github.add_pull(42, "contributor:faster-loader", HEAD_SHA)
    path = write_manifest(tmp_path, manifest)
    result = repro_gate(fork_workflow_run_env(tmp_path, github), "--manifest", str(path))

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("check run created, status skipped, comment created")
    (lookup,) = github.requests_to("GET", "/pulls$")
    assert lookup.query["head"] == "contributor:faster-loader"
    assert list(github.comments) == [42]
    assert json.loads(path.read_text(encoding="utf-8"))["reporting"]["pull_request"] == 42


def test_a_fork_whose_head_moved_on_gets_nothing_posted(
    tmp_path: Path, github: FakeGitHub, manifest: dict[str, Any]
) -> None:
    github.add_pull(42, "contributor:faster-loader", OTHER_SHA)  # pushed again since the run
    path = write_manifest(tmp_path, manifest)
    result = repro_gate(fork_workflow_run_env(tmp_path, github), "--manifest", str(path))

    assert result.returncode == 2
    assert result.stderr == (
        "repro-gate: error: not posting: pull request #42 from contributor:faster-loader is now"
        f" at {OTHER_SHA[:12]}, not {HEAD_SHA[:12]} that the gate ran on\n"
    )
    assert [seen.method for seen in github.seen] == ["GET"]
    assert github.check_runs == {} and github.comments == {}


def test_a_fork_without_an_open_pull_request_gets_nothing_posted(
    tmp_path: Path, github: FakeGitHub, manifest: dict[str, Any]
) -> None:
    path = write_manifest(tmp_path, manifest)
    result = repro_gate(fork_workflow_run_env(tmp_path, github), "--manifest", str(path))

    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "no open pull request from contributor:faster-loader in octo-org/trainer" in (
        result.stderr)
    assert github.check_runs == {} and github.comments == {}


def test_markdown_previews_what_would_be_posted_without_github(project: Path) -> None:
    gate = check(project, "--no-cost", *script("deterministic.py"))
    assert gate.exit_code == 0, gate.stdout + gate.stderr
    path = project / "repro-gate-out" / "manifest.json"
    before = path.read_bytes()

    result = repro_gate({}, "--manifest", str(path), "--markdown")  # no token, no GITHUB_*

    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    _, *parts = re.split(r"^## (.+)\n\n", result.stdout, flags=re.MULTILINE)
    headings, (comment, title, summary, job) = parts[0::2], parts[1::2]
    assert headings == ["Pull request comment", "Check run title", "Check run summary",
                        "Job summary"]
    manifest = json.loads(before)
    assert comment.rstrip().endswith("<!-- repro-gate:repro-gate -->")
    assert title.strip() == markdown.title(manifest) == "bit-for-bit reproducible"
    assert summary.startswith("### ✅ repro-gate: bit-for-bit reproducible")
    assert "**Reasons**" in job
    assert path.read_bytes() == before  # nothing recorded: nothing was posted


def test_a_push_run_looks_for_no_pull_request(
    tmp_path: Path, github: FakeGitHub, manifest: dict[str, Any]
) -> None:
    env = fork_workflow_run_env(tmp_path, github)
    payload = json.loads(Path(env["GITHUB_EVENT_PATH"]).read_text(encoding="utf-8"))
    payload["workflow_run"]["event"] = "push"
    Path(env["GITHUB_EVENT_PATH"]).write_text(json.dumps(payload), encoding="utf-8")
    result = repro_gate(env, "--manifest", str(write_manifest(tmp_path, manifest)))

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("check run created, status skipped, comment skipped")
    assert github.requests_to("GET", "/pulls$") == []
