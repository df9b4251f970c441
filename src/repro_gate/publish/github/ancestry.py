"""What a git checkout says about its HEAD: is it in the history of the base repository's refs?

Read with dulwich (the action's image has no git binary). Which local refs are the base
repository's, and why the others are not:

- `refs/remotes/<remote>/*` of a remote whose URL is the base repository on the job's server
  (`https://github.com/octo-org/trainer`, `.git` or not, or the ssh forms): a fetch from the base
  repository writes its branches there. A remote that names any other repository (a fork
  fetched with actions/checkout's `repository:` input) does not count;
- `refs/tags/*`, only while every remote of the checkout is the base repository: tags carry no
  remote, so a fetch from a fork could have written them;
- never `refs/heads/*`: checking a commit out makes a local branch point at it (actions/checkout
  makes one for the ref it checks out), so a local branch proves nothing;
- never `refs/remotes/pull/*` (where actions/checkout fetches `refs/pull/N/head` and
  `refs/pull/N/merge`): the base repository keeps every pull request's commits, forks' too.

A step of the job that fetches a pull request's refs into a base remote's namespace (`git fetch
origin refs/pull/42/head:refs/remotes/origin/pr`) makes them count: the check reads the
checkout as the job left it.

The answer for each commit asked about: reachable (it is the tip of a base ref or an ancestor of
one), unreachable, or unknown: the checkout is shallow (`.git/shallow`: history cut) or holds
no base ref at all, so only GitHub can tell.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, cast
from urllib.parse import urlsplit

if TYPE_CHECKING:  # dulwich is imported when a checkout is read: most jobs read none
    from dulwich.objects import ObjectID
    from dulwich.repo import Repo

REMOTES = b"refs/remotes/"
TAGS = b"refs/tags/"


class Reach(Enum):
    """Whether a commit is in the base repository's history, as far as the checkout tells."""

    REACHABLE = "reachable"
    UNREACHABLE = "unreachable"
    UNKNOWN = "unknown"  # shallow, or no base ref fetched: ask GitHub


@dataclass(frozen=True)
class BaseRepository:
    """The repository whose refs are trusted: "owner/name" on the job's GitHub server."""

    full_name: str
    host: str  # github.com, or a GHES host


@dataclass(frozen=True)
class Checkout:
    """HEAD of a checkout, its parents, and where each stands against the base refs."""

    root: Path
    head: str
    parents: tuple[str, ...]
    shallow: bool
    reach: Mapping[str, Reach]  # for HEAD and each parent


def read_checkout(directory: Path, base: BaseRepository) -> Checkout | None:
    """The checkout holding `directory` (found upwards); None when there is none, or its HEAD
    cannot be read."""
    from dulwich.errors import NotGitRepository
    from dulwich.objects import Commit
    from dulwich.repo import Repo

    try:
        with Repo.discover(str(directory)) as repository:
            head = repository.head()
            commit = repository[head]
            if not isinstance(commit, Commit):
                return None
            shallow = {sha.decode("ascii") for sha in repository.get_shallow()}
            tips = _base_tips(repository, base)
            targets = (head.decode("ascii"), *(p.decode("ascii") for p in commit.parents))
            found = _found_from(repository, tips, set(targets), shallow)
            unknown = Reach.UNKNOWN if shallow or not tips else Reach.UNREACHABLE
            return Checkout(
                root=Path(repository.path),
                head=targets[0],
                parents=targets[1:],
                shallow=bool(shallow),
                reach={sha: Reach.REACHABLE if sha in found else unknown for sha in targets},
            )
    except (NotGitRepository, KeyError, OSError, ValueError):
        return None


def _base_tips(repository: Repo, base: BaseRepository) -> set[str]:
    """The commits the base repository's refs point at (annotated tags peeled)."""
    from dulwich.object_store import peel_sha
    from dulwich.objects import Commit

    config = repository.get_config()
    remotes = {section[1]: config.get(section, b"url") for section in config.sections()
               if len(section) == 2 and section[0] == b"remote"}
    trusted = [name for name, url in remotes.items() if _is_base(url, base)]
    prefixes = [REMOTES + name + b"/" for name in trusted]
    if remotes and len(trusted) == len(remotes):
        prefixes.append(TAGS)
    tips = set()
    for name, sha in repository.get_refs().items():
        if any(name.startswith(prefix) for prefix in prefixes):
            try:
                _, peeled = peel_sha(repository.object_store, sha)
            except KeyError:
                continue
            if isinstance(peeled, Commit):
                tips.add(peeled.id.decode("ascii"))
    return tips


def _is_base(url: bytes | None, base: BaseRepository) -> bool:
    """`url` names the base repository: `https://host/owner/name(.git)`, `ssh://…` or
    `git@host:owner/name(.git)`, case-insensitive, credentials ignored."""
    if not url:
        return False
    text = url.decode("utf-8", "replace").strip()
    if "://" in text:
        parts = urlsplit(text)
        host, path = parts.hostname or "", parts.path
    else:  # scp-like: user@host:owner/name
        user_host, separator, path = text.partition(":")
        if not separator:
            return False
        host = user_host.rpartition("@")[2]
    name = path.strip("/").removesuffix(".git")
    return host.lower() == base.host.lower() and name.lower() == base.full_name.lower()


def _found_from(repository: Repo, tips: Iterable[str], targets: set[str],
                shallow: set[str]) -> set[str]:
    """Which of `targets` the history of `tips` holds; a walk that stops at shallow commits
    (their parents are not in the checkout) and at the first commit missing."""
    from dulwich.objects import Commit

    found: set[str] = set()
    seen: set[str] = set()
    stack = list(tips)
    while stack and found != targets:
        sha = stack.pop()
        if sha in seen:
            continue
        seen.add(sha)
        if sha in targets:
            found.add(sha)
        if sha in shallow:
            continue
        try:
            commit = repository.object_store[cast("ObjectID", sha.encode("ascii"))]
        except KeyError:
            continue
        if isinstance(commit, Commit):
            stack.extend(parent.decode("ascii") for parent in commit.parents)
    return found
