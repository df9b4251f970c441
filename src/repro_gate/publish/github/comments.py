"""The sticky pull-request comment: one per pull request and gate, updated in place.

The comment is found by its hidden marker *and* its author, so a comment by someone else that
carries the marker (copied by a contributor, say) is never taken over.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from repro_gate.publish.github.client import GitHubClient


@dataclass(frozen=True)
class CommentResult:
    """What happened to the sticky comment: created, updated or unchanged."""

    action: str
    id: int
    html_url: str | None


def upsert_sticky_comment(
    client: GitHubClient,
    repository: str,
    pull_request: int,
    *,
    marker: str,
    body: str,
    author: str,
) -> CommentResult:
    """Create the comment, update it when its body changed, or leave it alone."""
    existing = find_sticky_comment(client, repository, pull_request, marker=marker, author=author)
    if existing is None:
        created = client.request(
            "POST", f"/repos/{repository}/issues/{pull_request}/comments", json={"body": body}
        ).json()
        return CommentResult("created", int(created["id"]), created.get("html_url"))
    if existing.get("body") == body:
        return CommentResult("unchanged", int(existing["id"]), existing.get("html_url"))
    updated = client.request(
        "PATCH", f"/repos/{repository}/issues/comments/{existing['id']}", json={"body": body}
    ).json()
    return CommentResult("updated", int(updated["id"]), updated.get("html_url"))


def find_sticky_comment(
    client: GitHubClient, repository: str, pull_request: int, *, marker: str, author: str
) -> dict[str, Any] | None:
    """The oldest comment by `author` that carries `marker`, if any."""
    for comment in client.paginate(f"/repos/{repository}/issues/{pull_request}/comments"):
        user = comment.get("user") or {}
        if marker in (comment.get("body") or "") and same_login(user.get("login"), author):
            return comment
    return None


def same_login(login: Any, author: str) -> bool:
    """Logins compared case-insensitively (GitHub logins are), suffix `[bot]` included."""
    return isinstance(login, str) and login.lower() == author.lower()
