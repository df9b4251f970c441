"""The Actions environment the GitHub tests run in: constants, event payloads, retry policy,
and the step output file read back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from repro_gate.publish.github.client import RetryPolicy

HEAD_SHA = "6dcb09b5b57875f334f61aebed695e2e4193db5e"
MERGE_SHA = "0c1d2e3f405162738495a6b7c8d9e0f1a2b3c4d5"
PR_NUMBER = 42

# Short waits by configuration: the retry logic runs for real, only faster.
FAST = RetryPolicy(
    budget=4.0,
    request_timeout=2.0,
    base_delay=0.02,
    max_delay=0.1,
    secondary_wait=0.05,
    max_attempts=4,
)


def pull_request_payload(*, fork: bool = False) -> dict[str, Any]:
    """The parts of a `pull_request` event payload the gate reads."""
    head_repo = "contributor/trainer" if fork else "octo-org/trainer"
    return {
        "action": "synchronize",
        "number": PR_NUMBER,
        "pull_request": {
            "number": PR_NUMBER,
            "head": {"sha": HEAD_SHA, "ref": "feature", "repo": {"full_name": head_repo}},
            "base": {
                "sha": "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d",
                "ref": "main",
                "repo": {"full_name": "octo-org/trainer"},
            },
        },
        "repository": {"full_name": "octo-org/trainer"},
    }


def actions_environment(
    tmp_path: Path,
    api_url: str,
    *,
    event: str = "pull_request",
    payload: dict[str, Any] | None = None,
    token: str = "ghs_actions",
) -> dict[str, str]:
    """The variables the runner sets for a job, with the event payload written to a file."""
    event_path = tmp_path / "event.json"
    event_path.write_text(json.dumps(payload if payload is not None else pull_request_payload()))
    workspace = tmp_path / "workspace"
    workspace.mkdir(exist_ok=True)
    return {
        "GITHUB_ACTIONS": "true",
        "CI": "true",
        "GITHUB_API_URL": api_url,
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": "octo-org/trainer",
        "GITHUB_RUN_ID": "9876543210",
        "GITHUB_SHA": MERGE_SHA,
        "GITHUB_EVENT_NAME": event,
        "GITHUB_EVENT_PATH": str(event_path),
        "GITHUB_WORKSPACE": str(workspace),
        "INPUT_GITHUB-TOKEN": token,
    }


def ops_in_workspace(workspace: Path, count: int) -> list[dict[str, Any]]:
    """`count` nondeterministic ops at distinct lines of a file inside the repository."""
    return [
        {
            "op": f"scatter_add_cuda_{i}",
            "file": str(workspace / "src" / "model.py"),
            "line": 10 + i,
            "count": 1,
            "kind": "nondeterministic_op",
            "runs": ["det-1"],
        }
        for i in range(count)
    ]


def read_outputs(path: Path) -> dict[str, str]:
    """A GITHUB_OUTPUT file read the way the runner does (heredoc entries); later wins."""
    outputs: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").split("\n")
    index = 0
    while index < len(lines) and lines[index]:
        name, _, delimiter = lines[index].partition("<<")
        end = lines.index(delimiter, index + 1)
        outputs[name] = "\n".join(lines[index + 1 : end])
        index = end + 1
    return outputs
