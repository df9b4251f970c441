"""The pull request of a `workflow_run` from a fork, found by its head and checked against it.

GitHub leaves `workflow_run.pull_requests` empty when the run's head branch is in a fork, so the
trusted job that posts a fork's results looks the pull request up by the run's head repository
owner and branch (`GET /repos/{repository}/pulls?head=owner:branch`), and posts only while that
pull request's head is still the commit the gate ran on.
"""

from __future__ import annotations

from typing import Any

from repro_gate.errors import GitHubError, ReportInputError, one_line
from repro_gate.publish.github.client import GitHubClient


def pull_request_for_head(
    client: GitHubClient, repository: str, head_label: str, head_sha: str
) -> int:
    """The number of the open pull request from `head_label` ("owner:branch") at `head_sha`.

    Raises ReportInputError, one line, when there is none or its head has moved on.
    """
    query = {"head": head_label, "state": "open"}
    try:
        pulls = list(client.paginate(f"/repos/{repository}/pulls", query))
    except GitHubError as error:
        raise ReportInputError(
            f"cannot look up the pull request from {head_label}: {one_line(error)}"
        ) from None
    numbered = [p for p in pulls if isinstance(p, dict) and isinstance(p.get("number"), int)]
    if not numbered:
        raise ReportInputError(
            f"no open pull request from {head_label} in {repository}: nothing to post on"
        )
    for pull in numbered:
        if _head_sha(pull) == head_sha.lower():
            return int(pull["number"])
    latest = numbered[0]
    now = _head_sha(latest)[:12] or "an unknown commit"
    raise ReportInputError(
        f"not posting: pull request #{latest['number']} from {head_label} is now at {now},"
        f" not {head_sha[:12]} that the gate ran on"
    )


def _head_sha(pull: dict[str, Any]) -> str:
    head = pull.get("head")
    sha = head.get("sha") if isinstance(head, dict) else None
    return sha.lower() if isinstance(sha, str) else ""
