"""Which commit and pull request a run reports on, from the Actions environment."""

from __future__ import annotations

import json
from pathlib import Path

from helpers.github_env import (
    HEAD_SHA,
    MERGE_SHA,
    PR_NUMBER,
    actions_environment,
    pull_request_payload,
)

from repro_gate.publish.github.event import context_from_environment


def test_pull_request_uses_the_head_sha_not_the_merge_commit(tmp_path: Path) -> None:
    context = context_from_environment(actions_environment(tmp_path, "http://unused"))
    assert context.sha == HEAD_SHA
    assert context.sha != MERGE_SHA
    assert context.pull_request == PR_NUMBER
    assert context.repository == "octo-org/trainer"
    assert context.run_url == "https://github.com/octo-org/trainer/actions/runs/9876543210"
    assert context.fork is False


def test_fork_pull_request_is_recognised(tmp_path: Path) -> None:
    env = actions_environment(tmp_path, "http://unused", payload=pull_request_payload(fork=True))
    assert context_from_environment(env).fork is True


def test_pull_request_target_has_a_write_token_even_from_a_fork(tmp_path: Path) -> None:
    env = actions_environment(
        tmp_path,
        "http://unused",
        event="pull_request_target",
        payload=pull_request_payload(fork=True),
    )
    context = context_from_environment(env)
    assert (context.fork, context.sha) == (False, HEAD_SHA)


def test_push_uses_github_sha(tmp_path: Path) -> None:
    env = actions_environment(tmp_path, "http://unused", event="push", payload={"after": MERGE_SHA})
    context = context_from_environment(env)
    assert (context.sha, context.pull_request) == (MERGE_SHA, None)


def test_workflow_run_takes_pr_and_sha_from_the_triggering_run(tmp_path: Path) -> None:
    payload = {
        "workflow_run": {
            "head_sha": HEAD_SHA,
            "event": "pull_request",
            "pull_requests": [{"number": 17, "head": {"sha": HEAD_SHA}}],
        }
    }
    env = actions_environment(tmp_path, "http://unused", event="workflow_run", payload=payload)
    context = context_from_environment(env)
    assert (context.sha, context.pull_request, context.fork) == (HEAD_SHA, 17, False)


def test_unreadable_payload_falls_back_to_github_sha(tmp_path: Path) -> None:
    env = actions_environment(tmp_path, "http://unused")
    Path(env["GITHUB_EVENT_PATH"]).write_text("{not json")
    context = context_from_environment(env)
    assert (context.sha, context.pull_request) == (MERGE_SHA, None)
    Path(env["GITHUB_EVENT_PATH"]).write_text(json.dumps([1, 2]))
    assert context_from_environment(env).sha == MERGE_SHA
