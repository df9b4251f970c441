"""Fork safety: a fork's code does not run on a self-hosted runner of a public
repository, nor checked out by `pull_request_target`, unless the workflow allows it.

Each test runs the real `repro-gate check` or `repro-gate action` on an event payload shaped as
GitHub sends it (data/event-pull-request-fork.json), reporting to the validating fake GitHub API.
The gates that run train a tiny torch model (the action) or, to keep the file quick on a loaded
machine, a stdlib linear regression whose weights are the compared artifact: the refusal is
decided before any training starts, so what trains does not change what is tested.
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
from helpers.fake_github import FakeGitHub
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


class Job:
    """One Actions job's environment and workspace, on a given runner, for a given event."""

    def __init__(self, tmp_path: Path, github: FakeGitHub, payload: dict[str, Any], *,
                 runner: str = "self-hosted", event: str = "pull_request") -> None:
        self.env = actions_environment(tmp_path, github.base_url, event=event, payload=payload)
        self.env["RUNNER_ENVIRONMENT"] = runner
        self.env["GITHUB_OUTPUT"] = str(tmp_path / "output.txt")
        self.env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "summary.md")
        self.workspace = Path(self.env["GITHUB_WORKSPACE"])
        shutil.copy(TRAININGS / "tiny.py", self.workspace / "tiny.py")
        (self.workspace / "train.py").write_text(TORCH_TRAIN)
        (self.workspace / "quick_train.py").write_text(QUICK_TRAIN)
        (self.workspace / ".repro-gate.yml").write_text(CONFIG)

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
        """Commit the workspace as it is (a checkout); returns the commit's SHA."""
        if not (self.workspace / ".git").exists():
            porcelain.init(str(self.workspace))
        porcelain.add(str(self.workspace), paths=[str(self.workspace / name) for name in
                                                  ("tiny.py", "train.py", "quick_train.py",
                                                   ".repro-gate.yml")])
        sha = porcelain.commit(str(self.workspace), message=message.encode(),
                               author=b"A <a@example.com>", committer=b"A <a@example.com>")
        return sha.decode()


def assert_refused(job: Job, completed: subprocess.CompletedProcess[str], github: FakeGitHub,
                   why: str) -> str:
    """Exit 3, one line naming the fork and pointing to the docs, an error manifest with no run,
    nothing posted to GitHub; returns the line."""
    assert completed.returncode == EXIT_REFUSED, completed.stdout + completed.stderr
    (line,) = completed.stderr.splitlines()
    assert line.startswith("repro-gate: error: refused: pull request #42 comes from ")
    assert why in line and DOCS in line and "allow-fork-pull-requests: true" in line
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


@pytest.mark.parametrize(("payload", "fork"), [(fork_payload, "the fork contributor/trainer"),
                                               (deleted_fork_payload, "a deleted fork")])
def test_a_fork_on_a_self_hosted_runner_of_a_public_repository_is_refused(
    tmp_path: Path, github: FakeGitHub, payload: Any, fork: str
) -> None:
    job = Job(tmp_path, github, payload())
    line = assert_refused(job, job.check(), github,
                          "its untrusted code would run on a machine that keeps GPUs and caches")
    assert f"from {fork} of the public repository octo-org/trainer, on a self-hosted runner:" \
        in line


def test_the_action_refuses_a_fork_with_its_outputs_and_annotation(
    tmp_path: Path, github: FakeGitHub
) -> None:
    job = Job(tmp_path, github, fork_payload(), event="pull_request_review")
    completed = job.action()
    line = assert_refused(job, completed, github, "untrusted code")
    assert job.output("verdict") == "error"
    annotation = next(out for out in completed.stdout.splitlines() if out.startswith("::error"))
    assert "refused: pull request #42" in annotation
    assert "refused" in Path(job.env["GITHUB_STEP_SUMMARY"]).read_text()
    assert line.endswith(f"use the fork-safe workflow ({DOCS}) or set"
                         " allow-fork-pull-requests: true")


def test_the_upgrade_check_refuses_a_fork_too(tmp_path: Path, github: FakeGitHub) -> None:
    """`repro-gate upgrade` installs the pull request's lock and runs its training: refused the
    same way, in upgrade.json."""
    job = Job(tmp_path, github, fork_payload())
    completed = job.run("upgrade", "--quiet", "--upgrade", "--", sys.executable, "train.py")
    assert completed.returncode == EXIT_REFUSED, completed.stdout + completed.stderr
    (line,) = completed.stderr.splitlines()
    assert line.startswith("repro-gate: error: refused: pull request #42 comes from the fork")
    report = json.loads((job.workspace / "repro-gate-out" / "upgrade.json").read_text())
    assert report["verdict"] == "error" and report["runs"] == []
    assert [reason["code"] for reason in report["reasons"]] == ["fork_pull_request"]


def test_the_same_fork_on_a_github_hosted_runner_runs(tmp_path: Path, github: FakeGitHub) -> None:
    job = Job(tmp_path, github, fork_payload(), runner="github-hosted")
    assert_passed(job, job.check())


def test_a_pull_request_from_the_same_repository_runs_on_a_self_hosted_runner(
    tmp_path: Path, github: FakeGitHub
) -> None:
    job = Job(tmp_path, github, same_repository_payload())
    assert_passed(job, job.check())
    (run,) = github.check_runs.values()  # reported as usual
    assert run["head_sha"] == HEAD_SHA


def test_a_fork_of_a_private_repository_runs_on_a_self_hosted_runner(
    tmp_path: Path, github: FakeGitHub
) -> None:
    job = Job(tmp_path, github, private_payload())
    assert_passed(job, job.check())


def test_allowed_by_the_input_the_fork_runs_with_a_warning(
    tmp_path: Path, github: FakeGitHub
) -> None:
    job = Job(tmp_path, github, fork_payload())
    completed = job.action(**{"allow-fork-pull-requests": "true"})
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert job.manifest["verdict"] == "pass"
    assert job.manifest["config"]["allow_fork_pull_requests"] is True
    (warning,) = [line for line in completed.stdout.splitlines() if line.startswith("::warning")]
    assert warning.startswith("::warning title=repro-gate::allow-fork-pull-requests is true:"
                              " running anyway: pull request #42 comes from the fork"
                              " contributor/trainer")
    assert job.output("verdict") == "pass"


def test_allowed_by_the_flag_the_fork_runs_with_a_warning_on_stderr(
    tmp_path: Path, github: FakeGitHub
) -> None:
    job = Job(tmp_path, github, fork_payload())
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
                          " checking out the fork's head runs its code with them")
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


def test_pull_request_target_with_the_base_checked_out_runs(
    tmp_path: Path, github: FakeGitHub
) -> None:
    job = Job(tmp_path, github, fork_payload(), event="pull_request_target")
    base = job.commit("the base branch")
    payload = fork_payload()
    payload["pull_request"]["base"]["sha"] = base  # head and merge commits are not checked out
    Path(job.env["GITHUB_EVENT_PATH"]).write_text(json.dumps(payload))
    assert_passed(job, job.check())
    (run,) = github.check_runs.values()
    assert run["head_sha"] == HEAD_SHA
    assert PR_NUMBER in github.comments
