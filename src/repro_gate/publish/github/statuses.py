"""Commit statuses: the fallback when check runs can't be written, or always when configured."""

from __future__ import annotations

from dataclasses import dataclass

from repro_gate.publish.github.client import GitHubClient

DESCRIPTION_LIMIT = 140
STATES = {"pass": "success", "fail": "failure", "error": "error"}


@dataclass(frozen=True)
class CommitStatus:
    """A status GitHub recorded; `creator` is the login the token acts as."""

    id: int
    creator: str | None


def post_status(
    client: GitHubClient,
    repository: str,
    sha: str,
    *,
    state: str,
    context: str,
    description: str,
    target_url: str | None,
) -> CommitStatus:
    """POST a commit status; the description is cut to GitHub's 140 characters."""
    body = {"state": state, "context": context, "description": clip(description)}
    if target_url:
        body["target_url"] = target_url
    created = client.request("POST", f"/repos/{repository}/statuses/{sha}", json=body).json()
    creator = created.get("creator") if isinstance(created.get("creator"), dict) else {}
    return CommitStatus(id=int(created["id"]), creator=creator.get("login"))


def clip(description: str) -> str:
    """One line of at most 140 characters."""
    line = " ".join(description.split())
    return line if len(line) <= DESCRIPTION_LIMIT else line[: DESCRIPTION_LIMIT - 1] + "…"
