"""Fork safety: a fork's code does not run where it must not, unless the workflow says so.

Two situations are refused before anything runs (docs/action.md#pull-requests-from-forks):

- on a self-hosted runner, a `pull_request` (or `pull_request_review*`) event from a fork of a
  public repository: anyone can open one, and its code would run on a machine that keeps GPUs,
  caches and a Docker daemon from one job to the next;
- a `pull_request_target` event whose workspace has the fork's head (or the pull request's merge
  commit) checked out: that job runs with the base repository's secrets and a write token, so
  checking out the fork's head runs its code with them. On any runner: secrets are at stake
  everywhere.

`allow_fork_pull_requests` (input `allow-fork-pull-requests`) turns a refusal into a warning.
The workspace's HEAD is read with dulwich: the action's image has no git binary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repro_gate.errors import ForkRefusedError
from repro_gate.publish.github.event import read_event_payload

FORK_SAFE_DOCS = "docs/action.md#pull-requests-from-forks"
# Events that run the pull request's own code (the workflow of its merge commit).
PULL_REQUEST_CODE_EVENTS = ("pull_request", "pull_request_review", "pull_request_review_comment")
TARGET_EVENT = "pull_request_target"
SELF_HOSTED = "self-hosted"  # RUNNER_ENVIRONMENT on such a runner (else github-hosted, or unset)
# The input's name: the config key and the flag are documented beside it.
ALLOW_HINT = "or set allow-fork-pull-requests: true"
SELF_HOSTED_WHY = ("its untrusted code would run on a machine that keeps GPUs and caches"
                   " between jobs")
TARGET_WHY = ("pull_request_target runs with secrets; checking out the fork's head runs its code"
              " with them")


@dataclass(frozen=True)
class PullRequest:
    """What the event payload says about the pull request and where it comes from."""

    number: int | None
    head_repository: str | None  # "owner/name"; None: the fork was deleted
    base_repository: str | None
    public: bool  # the base repository is public: anyone can open a pull request from a fork
    commits: frozenset[str]  # the head and merge commits: checking either out runs the fork's code

    @property
    def from_fork(self) -> bool:
        return self.base_repository is not None and self.head_repository != self.base_repository

    def describe(self) -> str:
        """The subject of the message: pull request #42 comes from the fork contributor/trainer
        of (the public repository) octo-org/trainer."""
        number = f"pull request #{self.number}" if self.number else "the pull request"
        fork = f"the fork {self.head_repository}" if self.head_repository else "a deleted fork"
        base = f"the public repository {self.base_repository}" if self.public \
            else self.base_repository
        return f"{number} comes from {fork} of {base}"


@dataclass(frozen=True)
class ForkRisk:
    """A fork's code about to run where it must not: what happens, and why that is refused."""

    situation: str
    why: str

    def refusal(self) -> str:
        return f"refused: {self.situation}: {self.why}; use the fork-safe workflow" \
               f" ({FORK_SAFE_DOCS}) {ALLOW_HINT}"

    def warning(self) -> str:
        return f"allow-fork-pull-requests is true: running anyway: {self.situation}: {self.why}"


def check_fork_safety(environ: Mapping[str, str], workdir: Path, allowed: bool) -> str | None:
    """None when no fork's code is at stake; the warning to log when `allowed`; otherwise
    ForkRefusedError (exit code 3) with the one-line refusal."""
    risk = fork_risk(environ, workdir)
    if risk is None:
        return None
    if allowed:
        return risk.warning()
    raise ForkRefusedError(risk.refusal())


def fork_risk(environ: Mapping[str, str], workdir: Path) -> ForkRisk | None:
    """The risk of this job, from the event, the runner and the checked-out commit; None: none."""
    event = environ.get("GITHUB_EVENT_NAME", "")
    if event not in (*PULL_REQUEST_CODE_EVENTS, TARGET_EVENT):
        return None
    pull_request = read_pull_request(read_event_payload(environ), environ)
    if pull_request is None or not pull_request.from_fork:
        return None
    if event == TARGET_EVENT:
        checked_out = _checked_out(pull_request, _workspaces(environ, workdir))
        if checked_out is None:
            return None
        return ForkRisk(f"{pull_request.describe()}, and its code is checked out (HEAD"
                        f" {checked_out[:12]})", TARGET_WHY)
    if environ.get("RUNNER_ENVIRONMENT") != SELF_HOSTED or not pull_request.public:
        return None
    return ForkRisk(f"{pull_request.describe()}, on a self-hosted runner", SELF_HOSTED_WHY)


def read_pull_request(payload: Mapping[str, Any], environ: Mapping[str, str]) -> PullRequest | None:
    """The pull request of an event payload; None when the payload has none."""
    pr = _mapping(payload.get("pull_request"))
    if not pr:
        return None
    head, base = _mapping(pr.get("head")), _mapping(pr.get("base"))
    repository = _mapping(payload.get("repository"))
    base_name = (_text(_mapping(base.get("repo")).get("full_name"))
                 or _text(repository.get("full_name")) or environ.get("GITHUB_REPOSITORY"))
    commits = {sha.lower() for sha in (_text(head.get("sha")), _text(pr.get("merge_commit_sha")))
               if sha}
    number = pr.get("number")
    return PullRequest(
        number=number if isinstance(number, int) and not isinstance(number, bool) else None,
        # A deleted fork leaves `head.repo` null: still not the base repository.
        head_repository=_text(_mapping(head.get("repo")).get("full_name")),
        base_repository=base_name or None,
        public=_is_public(repository or _mapping(base.get("repo"))),
        commits=frozenset(commits),
    )


def _is_public(repository: Mapping[str, Any]) -> bool:
    """GitHub sends `private` (and `visibility`); without them, assume the worst: public."""
    if repository.get("private") is True:
        return False
    return repository.get("visibility") not in ("private", "internal")


def _workspaces(environ: Mapping[str, str], workdir: Path) -> list[Path]:
    """Where the code the gate runs is checked out: the workdir, and the job's workspace."""
    places = [workdir]
    if workspace := environ.get("GITHUB_WORKSPACE"):
        places.append(Path(workspace))
    return places


def _checked_out(pull_request: PullRequest, places: list[Path]) -> str | None:
    """HEAD of a repository holding one of `places` when it is the pull request's head or merge
    commit, or a child of one: `refs/pull/N/merge` fetched after the event has a merge commit
    the payload does not name, with the fork's head among its parents."""
    for place in places:
        commits = checked_out_commits(place)
        if set(commits) & pull_request.commits:
            return commits[0]
    return None


def checked_out_commits(directory: Path) -> tuple[str, ...]:
    """HEAD of the git repository holding `directory` (found upwards), then its parents; empty
    when there is none or it cannot be read (a directory that is not a checkout runs no fork's
    head)."""
    # Imported here: only a pull_request_target event from a fork reads a repository.
    from dulwich.errors import NotGitRepository
    from dulwich.objects import Commit
    from dulwich.repo import Repo

    try:
        with Repo.discover(str(directory)) as repository:
            head = repository.head()
            commit = repository[head]
            parents = commit.parents if isinstance(commit, Commit) else []
            return tuple(sha.decode("ascii").lower() for sha in (head, *parents))
    except (NotGitRepository, KeyError, OSError, ValueError):
        return ()


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
