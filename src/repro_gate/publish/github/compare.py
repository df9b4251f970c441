"""Whether a commit is in a branch's (or tag's) history, asked of GitHub: the compare endpoint.

`GET /repos/{owner}/{repo}/compare/{base}...{head}` with the branch as `base` and the commit as
`head` answers `status`: `identical` (the branch's tip is the commit) or `behind` (the commit
is an ancestor of the tip) mean the commit is in the branch's history; `ahead` and `diverged`
mean it is not. The branch is always the base repository's (a name without `owner:`), so the
answer is about that repository whatever commit is asked about.
"""

from __future__ import annotations

from enum import Enum
from urllib.parse import quote

from repro_gate.errors import GitHubError
from repro_gate.publish.github.client import GitHubClient


class CompareStatus(Enum):
    """The compare endpoint's `status` of `head` against `base`."""

    IDENTICAL = "identical"
    BEHIND = "behind"  # head is an ancestor of base
    AHEAD = "ahead"
    DIVERGED = "diverged"

    @property
    def in_history(self) -> bool:
        """The head commit is the base's tip or one of its ancestors."""
        return self in (CompareStatus.IDENTICAL, CompareStatus.BEHIND)


def compare(client: GitHubClient, repository: str, base: str, head: str) -> CompareStatus | None:
    """`head`'s status against `base` in `repository` ("owner/name"); None when GitHub knows no
    such branch or commit there (404). Another failure, or an answer without a known `status`,
    raises GitHubError."""
    # A slash in a branch name is sent escaped: the path has one segment for `basehead`.
    path = f"/repos/{repository}/compare/{quote(base, safe='')}...{quote(head, safe='')}"
    try:
        # One commit per page: only `status` is read, the commit list is not.
        response = client.request("GET", path, params={"per_page": 1})
    except GitHubError as error:
        if error.status == 404:
            return None
        raise
    try:
        body = response.json()
    except ValueError:
        raise GitHubError("GET", path, response.status_code, "the answer is not JSON") from None
    status = body.get("status") if isinstance(body, dict) else None
    try:
        return CompareStatus(status)
    except ValueError:
        raise GitHubError("GET", path, response.status_code,
                          f"the answer has no known status (got {status!r})") from None
