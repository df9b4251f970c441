"""What to report on: repository, commit, pull request and run, from the Actions environment.

On `pull_request` events `GITHUB_SHA` is GitHub's temporary merge commit, so the head SHA comes
from the event payload; on `workflow_run` (the trusted job that posts results for forks) the
commit and pull request come from the `workflow_run` object of the payload (for a fork, whose
`pull_requests` list is empty, its head repository and branch find the pull request:
`pulls.py`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PULL_REQUEST_EVENTS = ("pull_request", "pull_request_target")


@dataclass(frozen=True)
class EventContext:
    """The commit and pull request a gate run reports on."""

    event_name: str
    repository: str | None  # "owner/name"
    sha: str | None
    pull_request: int | None
    fork: bool  # a `pull_request` from a fork: GitHub gives it a read-only token
    run_url: str | None
    workspace: Path | None
    # `workflow_run`: "owner:branch" of the run's head, to find a fork's pull request by
    head_label: str | None = None


@dataclass(frozen=True)
class Commit:
    """The repository and commit a report is written to, both known."""

    repository: str  # "owner/name"
    sha: str


def read_event_payload(environ: Mapping[str, str]) -> dict[str, Any]:
    """The JSON payload at GITHUB_EVENT_PATH; empty when absent or unreadable."""
    path = environ.get("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return payload if isinstance(payload, dict) else {}


def context_from_environment(environ: Mapping[str, str]) -> EventContext:
    """Build the context from GITHUB_* variables and the event payload."""
    event_name = environ.get("GITHUB_EVENT_NAME", "")
    payload = read_event_payload(environ)
    sha = environ.get("GITHUB_SHA") or None
    pull_request = None
    fork = False
    head_label = None
    if event_name in PULL_REQUEST_EVENTS:
        pr = _mapping(payload.get("pull_request"))
        sha = _text(_mapping(pr.get("head")).get("sha")) or sha
        pull_request = _number(pr.get("number")) or _number(payload.get("number"))
        # pull_request_target runs in the base repository with a write token, forks or not.
        fork = event_name == "pull_request" and _is_fork(pr)
    elif event_name == "workflow_run":
        run = _mapping(payload.get("workflow_run"))
        sha = _text(run.get("head_sha")) or sha
        prs = run.get("pull_requests")
        if isinstance(prs, list) and prs:
            pull_request = _number(_mapping(prs[0]).get("number"))
        if run.get("event") in PULL_REQUEST_EVENTS:  # a push's run has no pull request to find
            head_label = _head_label(run)
    repository = environ.get("GITHUB_REPOSITORY") or None
    workspace = environ.get("GITHUB_WORKSPACE")
    return EventContext(
        event_name=event_name,
        repository=repository,
        sha=sha,
        pull_request=pull_request,
        fork=fork,
        run_url=run_url(environ),
        workspace=Path(workspace) if workspace else None,
        head_label=head_label,
    )


def run_url(environ: Mapping[str, str]) -> str | None:
    """`{server}/{repo}/actions/runs/{id}`, or None outside Actions."""
    repository = environ.get("GITHUB_REPOSITORY")
    run_id = environ.get("GITHUB_RUN_ID")
    if not repository or not run_id:
        return None
    server = environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
    return f"{server}/{repository}/actions/runs/{run_id}"


def _head_label(run: Mapping[str, Any]) -> str | None:
    """"owner:branch" of a `workflow_run`'s head (a fork's, for a fork's pull request)."""
    branch = _text(run.get("head_branch"))
    repository = _mapping(run.get("head_repository"))
    owner = _text(_mapping(repository.get("owner")).get("login"))
    owner = owner or (_text(repository.get("full_name")) or "").partition("/")[0]
    return f"{owner}:{branch}" if owner and branch else None


def _is_fork(pr: Mapping[str, Any]) -> bool:
    head_repo = _mapping(_mapping(pr.get("head")).get("repo"))
    base_repo = _mapping(_mapping(pr.get("base")).get("repo"))
    base_name = _text(base_repo.get("full_name"))
    if not base_name:
        return False
    # A deleted fork leaves `head.repo` null: still not the base repository.
    return _text(head_repo.get("full_name")) != base_name


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None
