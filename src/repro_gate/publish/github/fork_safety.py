"""Fork safety: code that is not the base repository's does not run where it must not, unless
the workflow says so.

Two rules, checked before anything runs (docs/action.md#pull-requests-from-forks):

- **On a self-hosted runner** (`RUNNER_ENVIRONMENT=self-hosted`) of a public repository, the
  commit checked out (HEAD of the working directory's checkout, and of the workspace's when it
  is another one) must be in the history of one of the base repository's branches or tags:
  the tip of one, or an ancestor of it. Whatever the event (`pull_request`,
  `pull_request_target`, `workflow_run`, `issue_comment`, `workflow_dispatch`, any other): the
  event says what triggered the job, not what the job checked out. Such a machine keeps GPUs,
  caches and a Docker daemon from one job to the next.
  - Which local refs are the base repository's, and why a local branch is not: `ancestry.py`.
  - GitHub's merge commit for a pull request (`refs/pull/N/merge`) is in no branch's history;
    it counts when both its parents do. Only the merge GitHub names counts so: `GITHUB_SHA` (on
    `pull_request` events the merge commit GitHub made for the run) or the event's
    `pull_request.merge_commit_sha`. Any other merge commit counts only by its own history: a
    merge of two base commits made by hand can hold any tree.
  - A shallow checkout (`.git/shallow`; actions/checkout's default `fetch-depth: 1`), or one
    that fetched no base ref, cannot tell by itself: GitHub's compare endpoint is asked
    (`compare.py`), with the job's token, about each commit the checkout could not place,
    against these names in order, deduplicated, stopping at the first that holds it:
    `GITHUB_BASE_REF`, `GITHUB_HEAD_REF` (the base repository's branch of that name, if any),
    the branch or tag `GITHUB_REF` names, and the repository's default branch. So at most 4
    requests for a commit, 8 for a merge commit's two parents. A failed request, or no token,
    refuses: nothing runs that could not be placed.
  - A working directory outside any git checkout cannot be placed either: refused.
  - A private or internal repository is not checked: only people with access to it can push to
    it or open a pull request on it.
- **`pull_request_target` on any runner**: a workspace that has the fork's head (or the pull
  request's merge commit, or a child of either) checked out runs the fork's code with the base
  repository's secrets and a write token. This is about secrets, not the machine.

`allow_fork_pull_requests` (input `allow-fork-pull-requests`) turns a refusal into a warning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from repro_gate.config.model import DEFAULT_REPORT_TIMEOUT
from repro_gate.errors import ForkRefusedError, GitHubError
from repro_gate.publish.github.ancestry import BaseRepository, Checkout, Reach, read_checkout
from repro_gate.publish.github.client import GitHubClient, RetryPolicy
from repro_gate.publish.github.compare import compare
from repro_gate.publish.github.event import read_event_payload
from repro_gate.publish.github.reporter import client_from_environment, token_from_environment

FORK_SAFE_DOCS = "docs/action.md#pull-requests-from-forks"
TARGET_EVENT = "pull_request_target"
SELF_HOSTED = "self-hosted"  # RUNNER_ENVIRONMENT on such a runner (else github-hosted, or unset)
DEFAULT_SERVER = "https://github.com"
# The input's name: the config key and the flag are documented beside it.
ALLOW_HINT = "or set allow-fork-pull-requests: true"
SELF_HOSTED_WHY = ("code that is not the base repository's would run on a machine that keeps"
                   " GPUs and caches between jobs")
TARGET_WHY = ("pull_request_target runs with secrets; checking out the fork's head runs its code"
              " with them")
NO_TOKEN = "there is no GitHub token to ask GitHub with (input github-token or GITHUB_TOKEN)"


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
    """Code not the base repository's about to run where it must not: what happens, and why
    that is refused."""

    situation: str
    why: str

    def refusal(self) -> str:
        return f"refused: {self.situation}: {self.why}; use the fork-safe workflow" \
               f" ({FORK_SAFE_DOCS}) {ALLOW_HINT}"

    def warning(self) -> str:
        return f"allow-fork-pull-requests is true: running anyway: {self.situation}: {self.why}"


class CannotTell(Exception):
    """GitHub could not be asked, or did not answer: the commit cannot be placed."""


def check_fork_safety(environ: Mapping[str, str], workdir: Path, allowed: bool,
                      timeout: float = DEFAULT_REPORT_TIMEOUT) -> str | None:
    """None when no outside code is at stake; the warning to log when `allowed`; otherwise
    ForkRefusedError (exit code 3) with the one-line refusal. `timeout`: seconds GitHub may
    take to answer, retries included (a shallow checkout only)."""
    risk = fork_risk(environ, workdir, timeout)
    if risk is None:
        return None
    if allowed:
        return risk.warning()
    raise ForkRefusedError(risk.refusal())


def fork_risk(environ: Mapping[str, str], workdir: Path,
              timeout: float = DEFAULT_REPORT_TIMEOUT) -> ForkRisk | None:
    """The risk of this job, from the runner and the checked-out commit; None: none."""
    payload = read_event_payload(environ)
    target = environ.get("GITHUB_EVENT_NAME") == TARGET_EVENT
    if target and (risk := _target_risk(environ, payload, workdir)):
        return risk
    if environ.get("RUNNER_ENVIRONMENT") != SELF_HOSTED:
        return None
    if not _is_public(_mapping(payload.get("repository"))):
        return None
    return _ancestry_risk(environ, payload, workdir, timeout)


# -- on a self-hosted runner: the checked-out commit is the base repository's -----------------


def _ancestry_risk(environ: Mapping[str, str], payload: Mapping[str, Any], workdir: Path,
                   timeout: float) -> ForkRisk | None:
    event = environ.get("GITHUB_EVENT_NAME") or "unknown"
    name = environ.get("GITHUB_REPOSITORY", "")
    host = urlsplit(environ.get("GITHUB_SERVER_URL") or DEFAULT_SERVER).hostname or ""
    base = BaseRepository(name, host)
    if not name:
        return ForkRisk(f"GITHUB_REPOSITORY is not set ({event} event), so whether the code is"
                        " the base repository's cannot be told, on a self-hosted runner",
                        SELF_HOSTED_WHY)
    checkout = read_checkout(workdir, base)
    if checkout is None:
        return ForkRisk(f"the working directory is not in a git checkout ({event} event), so"
                        f" whether its code is {name}'s cannot be told, on a self-hosted runner",
                        SELF_HOSTED_WHY)
    checkouts = [checkout]
    if workspace := environ.get("GITHUB_WORKSPACE"):
        other = read_checkout(Path(workspace), base)
        if other is not None and other.root != checkout.root:
            checkouts.append(other)
    github = GitHubQuestions(environ, payload, name, timeout)
    merges = _github_merges(environ, payload)
    for each in checkouts:
        if situation := _outside_base(each, merges, github):
            return ForkRisk(f"{situation} ({event} event), on a self-hosted runner",
                            SELF_HOSTED_WHY)
    return None


def _outside_base(checkout: Checkout, merges: frozenset[str],
                  github: GitHubQuestions) -> str | None:
    """Why the checkout's HEAD is not the base repository's; None when it is."""
    head = checkout.head
    if checkout.reach[head] is Reach.REACHABLE:
        return None
    merge = head in merges and len(checkout.parents) == 2
    subject = f"the checked-out commit {head[:12]}"
    if merge:
        subject += f", GitHub's merge of {' and '.join(p[:12] for p in checkout.parents)},"
    to_place = checkout.parents if merge else (head,)
    where = f"the history of any branch or tag of {github.repository}"
    for sha in to_place:
        if checkout.reach[sha] is Reach.UNKNOWN:
            try:
                if github.in_history(sha):
                    continue
            except CannotTell as error:
                local = "is shallow" if checkout.shallow else "holds no branch or tag of it"
                return f"whether {subject} is in {where} cannot be told: the checkout" \
                       f" {local} and {error}"
        elif checkout.reach[sha] is Reach.REACHABLE:
            continue
        return f"{subject} has the parent {sha[:12]}, which is not in {where}" if merge \
            else f"{subject} is not in {where}"
    return None


class GitHubQuestions:
    """Asks GitHub's compare endpoint whether a commit is in a base branch's or tag's history;
    the client is made at the first question (most jobs ask none)."""

    def __init__(self, environ: Mapping[str, str], payload: Mapping[str, Any],
                 repository: str, timeout: float) -> None:
        self.environ = environ
        self.repository = repository
        self.refs = _refs_to_ask(environ, payload)
        self.timeout = timeout
        self._client: GitHubClient | None = None

    def in_history(self, sha: str) -> bool:
        """True at the first ref that holds `sha`; False when none does. CannotTell when no
        request can be sent or one fails."""
        if not self.refs:
            raise CannotTell("the event names no branch or tag to ask GitHub about")
        client = self._client or self._connect()
        for ref in self.refs:
            try:
                status = compare(client, self.repository, ref, sha)
            except GitHubError as error:
                raise CannotTell(f"GitHub's compare failed: {error}") from None
            if status is not None and status.in_history:
                return True
        return False

    def _connect(self) -> GitHubClient:
        token = token_from_environment(self.environ)
        if not token:
            raise CannotTell(NO_TOKEN)
        self._client = client_from_environment(self.environ, token,
                                               RetryPolicy(budget=self.timeout))
        return self._client


def _refs_to_ask(environ: Mapping[str, str], payload: Mapping[str, Any]) -> tuple[str, ...]:
    """The base repository's branches and tags to ask about, in order, without repeats."""
    names = [environ.get("GITHUB_BASE_REF"), environ.get("GITHUB_HEAD_REF")]
    ref = environ.get("GITHUB_REF", "")
    if ref.startswith(("refs/heads/", "refs/tags/")):
        names.append(ref.split("/", 2)[2])
    names.append(_text(_mapping(payload.get("repository")).get("default_branch")))
    # No `owner:` (another repository of the network) and no `..` (a range): git forbids both
    # in a ref's name, so a name holding one is not a ref of the base repository.
    wanted = [name for name in names if name and ":" not in name and ".." not in name]
    return tuple(dict.fromkeys(wanted))


def _github_merges(environ: Mapping[str, str], payload: Mapping[str, Any]) -> frozenset[str]:
    """The merge commits GitHub made for the pull request: GITHUB_SHA (on `pull_request`
    events, `refs/pull/N/merge`) and the payload's `merge_commit_sha`."""
    pr = _mapping(payload.get("pull_request"))
    named = (environ.get("GITHUB_SHA"), _text(pr.get("merge_commit_sha")))
    return frozenset(sha.lower() for sha in named if sha)


# -- pull_request_target on any runner: the fork's code is not checked out ---------------------


def _target_risk(environ: Mapping[str, str], payload: Mapping[str, Any],
                 workdir: Path) -> ForkRisk | None:
    pull_request = read_pull_request(payload, environ)
    if pull_request is None or not pull_request.from_fork:
        return None
    checked_out = _checked_out(pull_request, _workspaces(environ, workdir))
    if checked_out is None:
        return None
    return ForkRisk(f"{pull_request.describe()}, and its code is checked out (HEAD"
                    f" {checked_out[:12]})", TARGET_WHY)


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


def _checked_out(pull_request: PullRequest, places: Sequence[Path]) -> str | None:
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
