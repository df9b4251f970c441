"""Fork safety: on a self-hosted runner of a public repository, only a commit in the history of
the base repository's branches or tags runs, whatever the event; a fork's code checked out by
`pull_request_target` is refused on any runner; the workflow can allow either, with a warning.

Each test runs the real `repro-gate action`, `check` or `upgrade` in a workspace that is a real
git checkout, laid out as actions/checkout lays it out (remote `origin` naming the repository on
github.com, fetched refs, shallow or not), fetched from real git repositories standing for the
base repository, a fork and GitHub's own copy (pull request refs and merge commits). It reports
to the validating fake GitHub API, which also answers the compare endpoint from the same
repositories' history. The gates that run train a tiny torch model or, to keep the file quick on
a loaded machine, a stdlib linear regression whose weights are the compared artifact: the
refusal is decided before any training starts, so what trains does not change what is tested.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from dulwich import porcelain
from helpers.fake_github import Answer, FakeGitHub
from helpers.git_repo import git
from helpers.github_env import HEAD_SHA, PR_NUMBER, actions_environment
from helpers.paths import FIXTURES, TRAININGS

from repro_gate.errors import EXIT_REFUSED

DATA = FIXTURES / "github"
DOCS = "docs/action.md#pull-requests-from-forks"
TORCH_TRAIN = "import torch\nfrom tiny import run_dir_path, train\n\ntorch.manual_seed(7)\n" \
              "train(steps=3, checkpoint=run_dir_path('model.pt'))\n"
# Seeded SGD on y = 2x + 1 in plain Python: no torch import, a second per run.
QUICK_TRAIN = """\
import json, os, random
random.seed(7)
w, b = 0.0, 0.0
for step in range(200):
    x = random.uniform(-1, 1)
    error = w * x + b - (2 * x + 1)
    w, b = w - 0.1 * error * x, b - 0.1 * error
out = os.path.join(os.environ.get("REPRO_GATE_RUN_DIR", "."), "weights.json")
with open(out, "w") as file:
    json.dump({"w": w, "b": b}, file)
"""
# No cost run: these tests are about whether the gate runs, not what determinism costs.
CONFIG = "cost:\n  enabled: false\n"
PROJECT = ("tiny.py", "train.py", "quick_train.py", ".repro-gate.yml")
ORIGIN = "https://github.com/octo-org/trainer"  # what actions/checkout names the remote
FORK_ORIGIN = "https://github.com/contributor/trainer"
NOT_IN_BASE = "is not in the history of any branch or tag of octo-org/trainer"
SELF_HOSTED_WHY = "code that is not the base repository's would run on a machine that keeps GPUs"
EVENTS = ("pull_request", "pull_request_target", "workflow_run", "issue_comment",
          "workflow_dispatch", "schedule")


def write_project(directory: Path) -> None:
    """The files a gate run needs: the trainings and the config."""
    shutil.copy(TRAININGS / "tiny.py", directory / "tiny.py")
    (directory / "train.py").write_text(TORCH_TRAIN)
    (directory / "quick_train.py").write_text(QUICK_TRAIN)
    (directory / ".repro-gate.yml").write_text(CONFIG)


def fork_payload() -> dict[str, Any]:
    """A `pull_request` payload from the fork contributor/trainer of the public octo-org/trainer."""
    return json.loads((DATA / "event-pull-request-fork.json").read_text(encoding="utf-8"))


def same_repository_payload() -> dict[str, Any]:
    payload = fork_payload()
    payload["pull_request"]["head"]["repo"] = copy.deepcopy(payload["pull_request"]["base"]["repo"])
    return payload


def private_payload() -> dict[str, Any]:
    payload = fork_payload()
    for repository in (payload["repository"], payload["pull_request"]["base"]["repo"],
                       payload["pull_request"]["head"]["repo"]):
        repository.update(private=True, visibility="private")
    return payload


def deleted_fork_payload() -> dict[str, Any]:
    payload = fork_payload()
    payload["pull_request"]["head"]["repo"] = None
    return payload


def event_payload(event: str) -> dict[str, Any]:
    """The payload of `event` in octo-org/trainer, about the fork's pull request #42 where the
    event has one; the commits it names are not the ones the tests check out."""
    repository = fork_payload()["repository"]
    match event:
        case "pull_request" | "pull_request_target":
            return fork_payload()
        case "workflow_run":
            return {"action": "completed", "repository": repository, "workflow_run": {
                "event": "pull_request", "head_sha": HEAD_SHA, "head_branch": "patch-1",
                "head_repository": {"full_name": "contributor/trainer",
                                    "owner": {"login": "contributor"}},
                "pull_requests": []}}
        case "issue_comment":
            return {"action": "created", "repository": repository, "comment": {"body": "/gate"},
                    "issue": {"number": PR_NUMBER, "pull_request": {"url": "https://api"
                              ".github.com/repos/octo-org/trainer/pulls/42"}}}
        case "workflow_dispatch":
            return {"ref": "refs/heads/main", "repository": repository,
                    "inputs": {"ref": "refs/pull/42/head"}}
    return {"schedule": "0 3 * * *", "repository": repository}


class Network:
    """The base repository octo-org/trainer, the fork contributor/trainer, and GitHub's copy of
    both (pull request refs, merge commits), as real git repositories:

        base  main:    first ── main          (tag v1.0 on first)
              feature: first ── feature
        fork  patch-1: main ── fork_head
    """

    def __init__(self, tmp_path: Path) -> None:
        self.base, self.fork, self.github = (tmp_path / name for name in ("base", "fork", "gh"))
        self.base.mkdir()
        git(self.base, "init", "-q")
        write_project(self.base)
        self.first = self.commit(self.base, "first.txt")
        git(self.base, "tag", "-a", "v1.0", "-m", "v1.0")
        git(self.base, "checkout", "-q", "-b", "feature")
        self.feature = self.commit(self.base, "feature.txt")
        git(self.base, "checkout", "-q", "main")
        self.main = self.commit(self.base, "main.txt")
        git(self.base.parent, "clone", "-q", str(self.base), str(self.fork))
        git(self.fork, "checkout", "-q", "-b", "patch-1")
        self.fork_head = self.commit(self.fork, "fork.txt")
        git(self.base.parent, "clone", "-q", "--mirror", str(self.base), str(self.github))
        self.sync()
        for repository in (self.base, self.fork, self.github):  # fetches by SHA, as GitHub's
            git(repository, "config", "uploadpack.allowAnySHA1InWant", "true")

    @staticmethod
    def commit(repository: Path, name: str) -> str:
        """A commit adding the file `name`; its SHA."""
        (repository / name).write_text(f"{name}\n")
        git(repository, "add", "-A")
        git(repository, "commit", "-q", "-m", f"add {name}")
        return git(repository, "rev-parse", "HEAD")

    def sync(self) -> None:
        """GitHub's copy gets the fork's commits, as a pull request's `refs/pull/42/head`."""
        git(self.github, "fetch", "-q", str(self.fork), "+patch-1:refs/pull/42/head")

    def merge(self, first: str, second: str) -> str:
        """A merge commit of `first` and `second` made in GitHub's copy (not on any branch of
        the base repository); its SHA."""
        scratch = self.github.parent / f"merge-{first[:7]}-{second[:7]}"
        git(self.github.parent, "clone", "-q", str(self.github), str(scratch))
        git(scratch, "checkout", "-q", "--detach", first)
        git(scratch, "merge", "-q", "--no-ff", "-m", "Merge", second)
        sha = git(scratch, "rev-parse", "HEAD")
        git(self.github, "fetch", "-q", str(scratch), f"+{sha}:refs/pull/42/merge")
        return sha

    def tell(self, github: FakeGitHub) -> None:
        """What GitHub knows: every commit of the network, and the base repository's refs."""
        commits = {}
        for line in git(self.github, "rev-list", "--parents", "--all").splitlines():
            sha, *parents = line.split()
            commits[sha] = parents
        refs = {}
        for line in git(self.base, "for-each-ref", "--format=%(refname:short) %(objectname)"
                        " %(*objectname)", "refs/heads", "refs/tags").splitlines():
            name, sha, *peeled = line.split()
            refs[name] = peeled[0] if peeled else sha
        github.set_history(commits, refs)


class Job:
    """One Actions job's environment and workspace, on a given runner, for a given event."""

    def __init__(self, tmp_path: Path, github: FakeGitHub, payload: dict[str, Any], *,
                 runner: str = "self-hosted", event: str = "pull_request") -> None:
        self.env = actions_environment(tmp_path, github.base_url, event=event, payload=payload)
        self.env["RUNNER_ENVIRONMENT"] = runner
        self.env["GITHUB_OUTPUT"] = str(tmp_path / "output.txt")
        self.env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "summary.md")
        self.workspace = Path(self.env["GITHUB_WORKSPACE"])
        write_project(self.workspace)

    def check(self, *flags: str) -> subprocess.CompletedProcess[str]:
        return self.run("check", "--quiet", "--report-timeout", "10", "-a", "weights.json",
                        *flags, "--", sys.executable, "quick_train.py")

    def action(self, **inputs: str) -> subprocess.CompletedProcess[str]:
        self.env["INPUT_COMMAND"] = f"{sys.executable} train.py"
        self.env.update({f"INPUT_{name.upper()}": value for name, value in inputs.items()})
        return self.run("action")

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        # The machine's own Actions variables (when the tests run in a job) stay out.
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("GITHUB_", "INPUT_", "RUNNER_"))}
        return subprocess.run([sys.executable, "-m", "repro_gate", *argv], cwd=self.workspace,
                              env={**base, **self.env}, capture_output=True, text=True,
                              timeout=300, check=False)

    @property
    def manifest(self) -> dict[str, Any]:
        return json.loads((self.workspace / "repro-gate-out" / "manifest.json").read_text())

    def output(self, name: str) -> str:
        """The step output `name` (the runner's `name<<delimiter` form)."""
        lines = Path(self.env["GITHUB_OUTPUT"]).read_text().splitlines()
        return lines[next(i for i, line in enumerate(lines) if line.startswith(f"{name}<<")) + 1]

    def commit(self, message: str) -> str:
        """Commit the workspace as it is (a checkout with no remote); returns the commit's SHA."""
        if not (self.workspace / ".git").exists():
            porcelain.init(str(self.workspace))
        porcelain.add(str(self.workspace), paths=[str(self.workspace / name) for name in PROJECT])
        sha = porcelain.commit(str(self.workspace), message=message.encode(),
                               author=b"A <a@example.com>", committer=b"A <a@example.com>")
        return sha.decode()

    def on(self, event: str, network: Network, *, merge: str | None = None) -> Job:
        """The variables GitHub sets for `event`: refs, and GITHUB_SHA (the merge commit it made
        for a `pull_request` event, else the base branch's tip)."""
        pull = event.startswith("pull_request")
        self.env["GITHUB_EVENT_NAME"] = event
        self.env["GITHUB_REF"] = "refs/pull/42/merge" if event == "pull_request" \
            else "refs/heads/main"
        self.env["GITHUB_SHA"] = merge or network.main
        if pull:
            self.env.update(GITHUB_BASE_REF="main", GITHUB_HEAD_REF="patch-1")
        return self

    def checkout(self, network: Network, head: str, *fetches: tuple[Path, str],
                 depth: int | None = None, origin: str = ORIGIN, branch: str | None = None,
                 ) -> str:
        """Lay the workspace out as actions/checkout does: `git init`, remote `origin`, the
        fetches (`(repository, refspec)`, shallow to `depth`), then `head` checked out (on the
        local branch `branch`, else detached). Returns HEAD."""
        git(self.workspace, "init", "-q")
        git(self.workspace, "remote", "add", "origin", origin)
        shallow = [f"--depth={depth}"] if depth else []
        for repository, refspec in fetches:
            git(self.workspace, "fetch", "-q", "--no-tags", *shallow, f"file://{repository}",
                refspec)
        where = ["-B", branch] if branch else ["--detach"]
        git(self.workspace, "checkout", "-q", "-f", *where, head)
        return git(self.workspace, "rev-parse", "HEAD")


def all_branches(network: Network) -> list[tuple[Path, str]]:
    """What `fetch-depth: 0` fetches from the base repository: every branch and tag."""
    return [(network.base, "+refs/heads/*:refs/remotes/origin/*"),
            (network.base, "+refs/tags/*:refs/tags/*")]


def assert_refused(job: Job, completed: subprocess.CompletedProcess[str], github: FakeGitHub,
                   why: str, *, start: str = "refused: ") -> str:
    """Exit 3, one line naming why and the allow input and pointing to the docs, an error
    manifest with no run, nothing posted to GitHub; returns the line."""
    assert completed.returncode == EXIT_REFUSED, completed.stdout + completed.stderr
    (line,) = completed.stderr.splitlines()
    assert line.startswith(f"repro-gate: error: {start}"), line
    assert why in line and DOCS in line and "allow-fork-pull-requests: true" in line, line
    manifest = job.manifest
    assert manifest["verdict"] == "error"
    assert [reason["code"] for reason in manifest["reasons"]] == ["fork_pull_request"]
    assert manifest["reasons"][0]["message"] == line.removeprefix("repro-gate: error: ")
    assert manifest["runs"] == []  # nothing trained
    out = job.workspace / "repro-gate-out"
    assert not any((out / "runs").iterdir()) and not any((out / "logs").iterdir())
    assert not list(job.workspace.glob("*.json")) and not list(job.workspace.glob("*.pt"))
    assert github.check_runs == {} and github.comments == {}
    return line


def assert_passed(job: Job, completed: subprocess.CompletedProcess[str]) -> None:
    assert completed.returncode == 0, completed.stdout + completed.stderr
    manifest = job.manifest
    assert manifest["verdict"] == "pass"
    assert [run["name"] for run in manifest["runs"]] == ["A", "B"]  # trained twice
    assert manifest["config"]["allow_fork_pull_requests"] is False
    assert "allow-fork-pull-requests" not in completed.stdout + completed.stderr


def compared(github: FakeGitHub) -> list[str]:
    """The `basehead` of each compare request the fake API saw, in order."""
    return [seen.path.rpartition("/compare/")[2] for seen in github.requests_to("GET", "/compare/")]


# -- on a self-hosted runner: only the base repository's history runs -------------------------


@pytest.mark.parametrize("event", EVENTS)
def test_a_fork_commit_checked_out_on_a_self_hosted_runner_is_refused_whatever_the_event(
    tmp_path: Path, github: FakeGitHub, event: str
) -> None:
    """The fork's commit, fetched from GitHub's `refs/pull/42/head` and checked out on a local
    branch (which must not count as the base repository's), beside every branch and tag of the
    base repository. The event's fields name other commits: only HEAD decides."""
    network = Network(tmp_path)
    job = Job(tmp_path, github, event_payload(event)).on(event, network)
    head = job.checkout(network, network.fork_head, *all_branches(network),
                        (network.github, "+refs/pull/42/head:refs/remotes/pull/42/head"),
                        branch="patch-1")
    completed = job.action()
    line = assert_refused(job, completed, github, SELF_HOSTED_WHY)
    assert line == (f"repro-gate: error: refused: the checked-out commit {head[:12]} {NOT_IN_BASE}"
                    f" ({event} event), on a self-hosted runner: {SELF_HOSTED_WHY} and caches"
                    f" between jobs; use the fork-safe workflow ({DOCS}) or set"
                    " allow-fork-pull-requests: true")
    assert job.output("verdict") == "error"
    assert any(out.startswith("::error") and "refused: the checked-out commit" in out
               for out in completed.stdout.splitlines())
    assert compared(github) == []  # a full checkout answers by itself


@pytest.mark.parametrize("event", EVENTS)
def test_a_base_branch_commit_runs_on_a_self_hosted_runner_whatever_the_event(
    tmp_path: Path, github: FakeGitHub, event: str
) -> None:
    """The tip of a base branch that is not the default one, and checked out on a local branch
    of its own."""
    network = Network(tmp_path)
    job = Job(tmp_path, github, event_payload(event)).on(event, network)
    job.checkout(network, network.feature, *all_branches(network), branch="feature")
    assert_passed(job, job.check())
    assert compared(github) == []


def test_an_older_commit_of_a_base_tag_runs(tmp_path: Path, github: FakeGitHub) -> None:
    """Reachable through a tag only: `v1.0`'s commit, with only the tags fetched."""
    network = Network(tmp_path)
    job = Job(tmp_path, github, event_payload("workflow_dispatch")).on("workflow_dispatch",
                                                                        network)
    job.checkout(network, network.first, (network.base, "+refs/tags/*:refs/tags/*"))
    assert_passed(job, job.check())


def test_a_fork_remote_does_not_make_its_branches_the_base_repositorys(
    tmp_path: Path, github: FakeGitHub
) -> None:
    """actions/checkout with `repository:` the fork: `origin` is the fork, so its branches and
    tags, fetched to refs/remotes/origin/* and refs/tags/*, are not the base repository's."""
    network = Network(tmp_path)
    git(network.fork, "tag", "v1.1", network.fork_head)
    job = Job(tmp_path, github, event_payload("workflow_run")).on("workflow_run", network)
    head = job.checkout(network, network.fork_head,
                        (network.fork, "+refs/heads/*:refs/remotes/origin/*"),
                        (network.fork, "+refs/tags/*:refs/tags/*"), origin=FORK_ORIGIN)
    line = assert_refused(job, job.check(), github, SELF_HOSTED_WHY)
    assert f"the checked-out commit {head[:12]} {NOT_IN_BASE} (workflow_run event)" in line


@pytest.mark.parametrize("second", ["fork head", "base branch"])
def test_githubs_merge_commit_runs_when_both_its_parents_are_the_base_repositorys(
    tmp_path: Path, github: FakeGitHub, second: str
) -> None:
    """`pull_request` checks out GitHub's merge of the base branch and the pull request's head
    (GITHUB_SHA): refused when the head is the fork's, run when it is a base branch's."""
    network = Network(tmp_path)
    parent = network.fork_head if second == "fork head" else network.feature
    merge = network.merge(network.main, parent)
    job = Job(tmp_path, github, event_payload("pull_request")).on("pull_request", network,
                                                                  merge=merge)
    job.checkout(network, merge, *all_branches(network),
                 (network.github, "+refs/pull/42/merge:refs/remotes/pull/42/merge"))
    if second == "base branch":
        assert_passed(job, job.check())
        return
    line = assert_refused(job, job.check(), github, SELF_HOSTED_WHY)
    assert f"the checked-out commit {merge[:12]}, GitHub's merge of {network.main[:12]} and" \
           f" {parent[:12]}, has the parent {parent[:12]}, which is not in the history of any" \
           " branch or tag of octo-org/trainer (pull_request event)" in line


def test_a_merge_commit_github_did_not_make_is_not_trusted_for_its_parents(
    tmp_path: Path, github: FakeGitHub
) -> None:
    """A fork can push a merge of two base commits whose tree holds anything: only a merge
    GitHub names (GITHUB_SHA, the payload's merge_commit_sha) counts by its parents."""
    network = Network(tmp_path)
    merge = network.merge(network.main, network.feature)
    job = Job(tmp_path, github, event_payload("issue_comment")).on("issue_comment", network)
    job.checkout(network, merge, *all_branches(network),
                 (network.github, "+refs/pull/42/merge:refs/remotes/pull/42/merge"))
    line = assert_refused(job, job.check(), github, SELF_HOSTED_WHY)
    assert f"the checked-out commit {merge[:12]} {NOT_IN_BASE} (issue_comment event)" in line


@pytest.mark.parametrize("checked_out", ["the fork's branch", "the merge ref"])
def test_pull_request_target_after_further_pushes_is_refused_on_a_self_hosted_runner(
    tmp_path: Path, github: FakeGitHub, checked_out: str
) -> None:
    """The event names the fork's head at the time; the fork pushed twice since, and the job
    checks out the fork's branch (actions/checkout with `repository:` the fork and `ref:` the
    head branch) or `refs/pull/42/merge` as it is now: neither the event's head nor its merge
    commit, nor a child of either, is checked out."""
    network = Network(tmp_path)
    payload = fork_payload()
    payload["pull_request"]["head"]["sha"] = network.fork_head
    payload["pull_request"]["merge_commit_sha"] = network.merge(network.main, network.fork_head)
    Network.commit(network.fork, "second.txt")
    pushed = Network.commit(network.fork, "third.txt")
    network.sync()
    job = Job(tmp_path, github, payload, event="pull_request_target").on(
        "pull_request_target", network)
    if checked_out == "the fork's branch":
        head = job.checkout(network, "origin/patch-1",
                            (network.fork, "+patch-1:refs/remotes/origin/patch-1"),
                            origin=FORK_ORIGIN, branch="patch-1")
        assert head == pushed
    else:
        merge = network.merge(network.main, pushed)
        head = job.checkout(network, merge, *all_branches(network),
                            (network.github, "+refs/pull/42/merge:refs/remotes/pull/42/merge"))
    assert network.fork_head not in git(job.workspace, "log", "-1", "--format=%H %P")
    line = assert_refused(job, job.check(), github, SELF_HOSTED_WHY)
    assert f"the checked-out commit {head[:12]} {NOT_IN_BASE} (pull_request_target event)" in line


# -- a shallow checkout asks GitHub -----------------------------------------------------------


@pytest.mark.parametrize("second", ["fork head", "base branch"])
def test_a_shallow_checkout_asks_github_and_follows_its_answer(
    tmp_path: Path, github: FakeGitHub, second: str
) -> None:
    """actions/checkout's default for `pull_request`: GitHub's merge commit alone, depth 1, so
    its parents are not in the checkout. The compare endpoint is asked about each parent:
    against the base branch, then a base branch named as the head branch, then the default
    branch (here the base branch again: not asked twice)."""
    network = Network(tmp_path)
    parent = network.fork_head if second == "fork head" else network.feature
    merge = network.merge(network.main, parent)
    network.tell(github)
    job = Job(tmp_path, github, event_payload("pull_request")).on("pull_request", network,
                                                                  merge=merge)
    if second == "base branch":
        job.env["GITHUB_HEAD_REF"] = "feature"
    job.checkout(network, merge,
                 (network.github, "+refs/pull/42/merge:refs/remotes/pull/42/merge"), depth=1)
    assert (job.workspace / ".git" / "shallow").is_file()
    head_ref = job.env["GITHUB_HEAD_REF"]
    assert compared(github) == []
    if second == "base branch":
        assert_passed(job, job.check())
        assert compared(github) == [f"main...{network.main}", f"main...{parent}",
                                    f"{head_ref}...{parent}"]
        return
    line = assert_refused(job, job.check(), github, SELF_HOSTED_WHY)
    assert f"has the parent {parent[:12]}, which is not in the history" in line
    assert compared(github) == [f"main...{network.main}", f"main...{parent}",
                                f"{head_ref}...{parent}"]
    assert all(seen.query == {"per_page": "1"} for seen in github.requests_to("GET", "/compare/"))


def test_a_shallow_checkout_of_a_base_branch_tip_asks_nothing(
    tmp_path: Path, github: FakeGitHub
) -> None:
    """actions/checkout's default for `push` and `workflow_dispatch`: the branch's tip, depth 1,
    fetched to refs/remotes/origin/main: the checkout holds the answer."""
    network = Network(tmp_path)
    job = Job(tmp_path, github, event_payload("workflow_dispatch")).on("workflow_dispatch",
                                                                        network)
    job.checkout(network, network.main, (network.base, f"+{network.main}:refs/remotes/origin/main"),
                 depth=1)
    assert_passed(job, job.check())
    assert compared(github) == []


def test_a_shallow_checkout_is_refused_when_github_cannot_answer(
    tmp_path: Path, github: FakeGitHub
) -> None:
    network = Network(tmp_path)
    network.tell(github)
    github.script("GET", "/compare/", Answer(403, body={"message": "Resource not accessible by"
                                                                   " integration"}))
    job = Job(tmp_path, github, event_payload("workflow_run")).on("workflow_run", network)
    head = job.checkout(network, network.feature,
                        (network.base, "+refs/heads/feature:refs/remotes/pull/42/head"), depth=1)
    line = assert_refused(job, job.check(), github, SELF_HOSTED_WHY)
    assert f"whether the checked-out commit {head[:12]} is in the history of any branch or tag" \
           " of octo-org/trainer cannot be told: the checkout is shallow and GitHub's compare" \
           " failed: GET /repos/octo-org/trainer/compare/main..." in line
    assert compared(github) == [f"main...{head}"]


def test_a_workspace_that_is_not_a_git_checkout_is_refused(
    tmp_path: Path, github: FakeGitHub
) -> None:
    job = Job(tmp_path, github, fork_payload(), event="pull_request_review")
    line = assert_refused(job, job.action(), github, SELF_HOSTED_WHY)
    assert "the working directory is not in a git checkout (pull_request_review event), so" \
           " whether its code is octo-org/trainer's cannot be told, on a self-hosted runner" \
           in line
    assert "refused" in Path(job.env["GITHUB_STEP_SUMMARY"]).read_text()


def test_the_upgrade_check_refuses_a_fork_commit_too(tmp_path: Path, github: FakeGitHub) -> None:
    """`repro-gate upgrade` installs the checkout's lock and runs its training: refused the
    same way, in upgrade.json."""
    network = Network(tmp_path)
    job = Job(tmp_path, github, fork_payload()).on("pull_request", network)
    head = job.checkout(network, network.fork_head, *all_branches(network),
                        (network.github, "+refs/pull/42/head:refs/remotes/pull/42/head"))
    completed = job.run("upgrade", "--quiet", "--upgrade", "--", sys.executable, "train.py")
    assert completed.returncode == EXIT_REFUSED, completed.stdout + completed.stderr
    (line,) = completed.stderr.splitlines()
    assert line.startswith(f"repro-gate: error: refused: the checked-out commit {head[:12]}")
    report = json.loads((job.workspace / "repro-gate-out" / "upgrade.json").read_text())
    assert report["verdict"] == "error" and report["runs"] == []
    assert [reason["code"] for reason in report["reasons"]] == ["fork_pull_request"]


@pytest.mark.parametrize("payload", [fork_payload, deleted_fork_payload])
def test_the_same_fork_on_a_github_hosted_runner_runs(
    tmp_path: Path, github: FakeGitHub, payload: Any
) -> None:
    network = Network(tmp_path)
    job = Job(tmp_path, github, payload(), runner="github-hosted").on("pull_request", network)
    job.checkout(network, network.fork_head,
                 (network.github, "+refs/pull/42/head:refs/remotes/pull/42/head"), depth=1)
    assert_passed(job, job.check())
    assert compared(github) == []


def test_a_pull_request_from_the_same_repository_runs_on_a_self_hosted_runner(
    tmp_path: Path, github: FakeGitHub
) -> None:
    network = Network(tmp_path)
    job = Job(tmp_path, github, same_repository_payload()).on("pull_request", network)
    job.checkout(network, network.feature, *all_branches(network))
    assert_passed(job, job.check())
    (run,) = github.check_runs.values()  # reported as usual
    assert run["head_sha"] == HEAD_SHA


def test_a_fork_of_a_private_repository_runs_on_a_self_hosted_runner(
    tmp_path: Path, github: FakeGitHub
) -> None:
    network = Network(tmp_path)
    job = Job(tmp_path, github, private_payload()).on("pull_request", network)
    job.checkout(network, network.fork_head,
                 (network.github, "+refs/pull/42/head:refs/remotes/pull/42/head"))
    assert_passed(job, job.check())


def test_allowed_by_the_input_the_fork_runs_with_a_warning(
    tmp_path: Path, github: FakeGitHub
) -> None:
    network = Network(tmp_path)
    job = Job(tmp_path, github, fork_payload()).on("pull_request", network)
    head = job.checkout(network, network.fork_head, *all_branches(network),
                        (network.github, "+refs/pull/42/head:refs/remotes/pull/42/head"))
    completed = job.action(**{"allow-fork-pull-requests": "true"})
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert job.manifest["verdict"] == "pass"
    assert job.manifest["config"]["allow_fork_pull_requests"] is True
    (warning,) = [line for line in completed.stdout.splitlines() if line.startswith("::warning")]
    assert warning.startswith("::warning title=repro-gate::allow-fork-pull-requests is true:"
                              f" running anyway: the checked-out commit {head[:12]} {NOT_IN_BASE}")
    assert job.output("verdict") == "pass"


def test_allowed_by_the_flag_the_fork_runs_with_a_warning_on_stderr(
    tmp_path: Path, github: FakeGitHub
) -> None:
    network = Network(tmp_path)
    job = Job(tmp_path, github, fork_payload()).on("pull_request", network)
    job.checkout(network, network.fork_head, *all_branches(network),
                 (network.github, "+refs/pull/42/head:refs/remotes/pull/42/head"))
    completed = job.check("--allow-fork-pull-requests")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert job.manifest["verdict"] == "pass"
    warnings = [line for line in completed.stderr.splitlines() if "allow-fork" in line]
    assert warnings == [line for line in warnings if line.startswith(
        "repro-gate: warning: allow-fork-pull-requests is true: running anyway:")]
    assert len(warnings) == 1


def test_a_bad_allow_input_is_a_configuration_error(tmp_path: Path, github: FakeGitHub) -> None:
    job = Job(tmp_path, github, fork_payload())
    completed = job.action(**{"allow-fork-pull-requests": "yes"})
    assert completed.returncode == 2
    assert completed.stderr.splitlines() == [
        "repro-gate: error: input allow-fork-pull-requests: must be true or false, got 'yes'"]
    assert job.manifest["reasons"][0]["code"] == "config"


# -- pull_request_target, on any runner: the fork's code is not run with secrets ---------------


@pytest.mark.parametrize(("checked_out", "runner"), [
    ("head", "github-hosted"), ("head", "self-hosted"), ("merge", "self-hosted"),
    ("child of head", "self-hosted")])
def test_pull_request_target_with_the_forks_code_checked_out_is_refused(
    tmp_path: Path, github: FakeGitHub, checked_out: str, runner: str
) -> None:
    """What actions/checkout fetched: the fork's head, the merge commit the payload names, or
    `refs/pull/42/merge` made after the event (a commit the payload does not name, whose parent
    is the fork's head)."""
    job = Job(tmp_path, github, fork_payload(), runner=runner, event="pull_request_target")
    payload = fork_payload()
    commit = job.commit("the fork's change")
    if checked_out == "merge":
        payload["pull_request"]["merge_commit_sha"] = commit
    else:
        payload["pull_request"]["head"]["sha"] = commit
    if checked_out == "child of head":
        (job.workspace / "train.py").write_text(TORCH_TRAIN + "# merged with main\n")
        commit = job.commit("Merge into main")
        pull_request = payload["pull_request"]
        assert commit not in (pull_request["head"]["sha"], pull_request["merge_commit_sha"])
    Path(job.env["GITHUB_EVENT_PATH"]).write_text(json.dumps(payload))
    line = assert_refused(job, job.check(), github, "pull_request_target runs with secrets;"
                          " checking out the fork's head runs its code with them",
                          start="refused: pull request #42 comes from ")
    assert f"of the public repository octo-org/trainer, and its code is checked out" \
           f" (HEAD {commit[:12]}): pull_request_target" in line


def test_pull_request_target_allowed_in_the_config_file_runs_the_forks_head(
    tmp_path: Path, github: FakeGitHub
) -> None:
    job = Job(tmp_path, github, fork_payload(), event="pull_request_target")
    (job.workspace / ".repro-gate.yml").write_text(CONFIG + "allow_fork_pull_requests: true\n")
    payload = fork_payload()
    payload["pull_request"]["head"]["sha"] = job.commit("the fork's change")
    Path(job.env["GITHUB_EVENT_PATH"]).write_text(json.dumps(payload))
    completed = job.check()
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert job.manifest["config"]["allow_fork_pull_requests"] is True
    (warning,) = [line for line in completed.stderr.splitlines() if "allow-fork" in line]
    assert "pull_request_target runs with secrets" in warning


@pytest.mark.parametrize("runner", ["github-hosted", "self-hosted"])
def test_pull_request_target_with_the_base_checked_out_runs(
    tmp_path: Path, github: FakeGitHub, runner: str
) -> None:
    """actions/checkout's default for `pull_request_target`: the base branch's tip, depth 1."""
    network = Network(tmp_path)
    job = Job(tmp_path, github, fork_payload(), runner=runner, event="pull_request_target")
    job.on("pull_request_target", network)
    job.checkout(network, network.main, (network.base, f"+{network.main}:refs/remotes/origin/main"),
                 depth=1)
    assert_passed(job, job.check())
    (run,) = github.check_runs.values()
    assert run["head_sha"] == HEAD_SHA
    assert PR_NUMBER in github.comments
