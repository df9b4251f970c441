"""The action in upgrade mode on a pull request, end to end: `repro-gate action` (local mode, no
Docker) in a git checkout whose base commit locks numlib 1.0 and whose pull request upgrades it
to 1.1, like a Dependabot pull request. Real uv, real environments from the local wheel index
(tests/helpers/upgrade_index.py), a real tiny torch training, the validating fake GitHub API.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import github_env, upgrade_index
from helpers.git_repo import git

from repro_gate import config
from repro_gate.cli.commands.action import upgrade_options
from repro_gate.config import ToleranceConfig
from repro_gate.config.overrides import from_action_inputs
from repro_gate.errors import ConfigError
from repro_gate.manifest.upgrade_document import read_upgrade
from repro_gate.upgrade import UpgradeRequest
from repro_gate.upgrade.check import CandidateSource, UpgradeOptions

TRAIN = """\
import harmless
import numlib
import torch

torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
inputs = torch.randn(16, 4) * numlib.SCALE
targets = torch.randn(16, 1)
for _ in range(4):
    optimizer.zero_grad()
    loss = ((model(harmless.identity(inputs)) - targets) ** 2).mean()
    loss.backward()
    optimizer.step()
torch.save(model.state_dict(), "model.pt")
"""
def pull_request_checkout(project: Path, index: Any, env_cache: Path) -> str:
    """The project at its base commit (numlib 1.0), then the pull request's commit that
    upgrades numlib (`uv lock --upgrade-package numlib`); returns the base commit's SHA."""
    (project / "train.py").write_text(TRAIN)
    (project / ".repro-gate.yml").write_text(
        f"cost:\n  enabled: false\nupgrade:\n  cache_dir: {json.dumps(str(env_cache))}\n")
    (project / ".gitignore").write_text("repro-gate-out/\nmodel.pt\n")
    git(project, "init", "-q", "-b", "main")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "base")
    base = git(project, "rev-parse", "HEAD")
    git(project, "checkout", "-q", "-b", "dependabot/uv/numlib-1.1")
    upgrade_index.run_uv("lock", "--upgrade-package", "numlib", *index.args, cwd=project)
    git(project, "commit", "-q", "-am", "Bump numlib from 1.0 to 1.1")
    return base


def run_action(project: Path, environ: dict[str, str], index: Any
               ) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_"))}
    inputs = {"INPUT_MODE": "upgrade", "INPUT_NAME": "train",
              "INPUT_COMMAND": "python train.py",  # the environment's python, first on PATH
              "INPUT_INHERIT-SITE-PACKAGES": "true"}
    uv_offline = {"UV_NO_INDEX": "1", "UV_FIND_LINKS": str(index.path), "UV_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "repro_gate", "action"], cwd=project,
        env={**base, **environ, **inputs, **uv_offline}, capture_output=True, text=True,
        timeout=420, check=False)


def test_a_dependabot_pull_request_gets_the_comment_naming_the_culprit(
    make_project: Any, package_index: Any, env_cache: Path, github: Any, tmp_path: Path
) -> None:
    project = make_project("uv-project")
    base = pull_request_checkout(project, package_index, env_cache)
    payload = github_env.pull_request_payload()
    payload["pull_request"]["base"]["sha"] = base
    environ = github_env.actions_environment(tmp_path, github.base_url, payload=payload)
    environ.update(GITHUB_WORKSPACE=str(project), GITHUB_OUTPUT=str(tmp_path / "output"),
                   GITHUB_STEP_SUMMARY=str(tmp_path / "summary.md"))

    done = run_action(project, environ, package_index)

    assert done.returncode == 1, done.stdout + done.stderr
    document = read_upgrade(project / "repro-gate-out" / "upgrade.json")
    assert document["verdict"] == "changed"
    assert [culprit["name"] for culprit in document["culprits"]] == ["numlib"]
    assert document["baseline"]["lock"] == str(
        project / "repro-gate-out" / "upgrade" / "base" / "uv.lock")
    assert (document["candidate"]["source"], document["candidate"]["upgrade"]) == ("given", [])
    assert [(c["name"], c["old"], c["new"]) for c in document["changes"]] == [
        ("numlib", "1.0", "1.1")]
    assert document["reporting"]["ok"] is True

    (comment,) = github.comments[github_env.PR_NUMBER]
    assert "numerics changed" in comment["body"].splitlines()[0]
    assert "numlib" in comment["body"].splitlines()[0]
    assert comment["body"].rstrip().endswith("<!-- repro-gate-upgrade:train -->")
    (run,) = github.check_runs.values()
    assert (run["name"], run["head_sha"]) == ("repro-gate upgrade / train", github_env.HEAD_SHA)
    assert (run["status"], run["conclusion"]) == ("completed", "failure")
    outputs = (tmp_path / "output").read_text().splitlines()
    for name, value in (("verdict", "fail"), ("upgrade-verdict", "changed"),
                        ("culprits", "numlib")):
        assert outputs[outputs.index(next(o for o in outputs if o.startswith(f"{name}<<"))) + 1
                       ] == value
    assert "numlib" in (tmp_path / "summary.md").read_text()
    assert "numlib" in done.stdout  # the console report


def action_error(workdir: Path, **inputs: str) -> subprocess.CompletedProcess[str]:
    """`repro-gate action` with `inputs` (INPUT_ names) on a pull request, no GitHub API."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_"))}
    payload = github_env.pull_request_payload()  # base commit 1a2b3c4d…: not in the checkout
    environ = github_env.actions_environment(workdir, "http://127.0.0.1:9", payload=payload)
    environ.update(GITHUB_WORKSPACE=str(workdir), GITHUB_OUTPUT=str(workdir / "output"))
    return subprocess.run(
        [sys.executable, "-m", "repro_gate", "action"], cwd=workdir,
        env={**base, **environ, **inputs}, capture_output=True, text=True, timeout=120,
        check=False)


def test_an_unknown_mode_and_conflicting_inputs_are_one_line_configuration_errors(
    tmp_path: Path
) -> None:
    unknown = action_error(tmp_path, INPUT_MODE="upgrde")
    both = action_error(tmp_path, **{"INPUT_MODE": "upgrade", "INPUT_CANDIDATE-LOCK": "pr.lock",
                                     "INPUT_UPGRADE-PACKAGES": "torch"})

    assert (unknown.returncode, unknown.stderr) == (
        2, "repro-gate: error: input mode: must be check or upgrade, got 'upgrde'\n")
    assert (both.returncode, both.stderr) == (
        2, "repro-gate: error: input candidate-lock gives the candidate and upgrade-packages"
           " computes one: set only one of them\n")
    assert "verdict<<" in (tmp_path / "output").read_text()  # the step still gets its verdict


def test_a_pull_request_whose_base_commit_was_not_fetched_says_how_to_fetch_it(
    tmp_path: Path
) -> None:
    (tmp_path / "uv.lock").write_text("version = 1\n")
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "the pull request's only commit")

    done = action_error(tmp_path, INPUT_MODE="upgrade")

    assert done.returncode == 2
    assert done.stderr == (
        "repro-gate: error: the base commit 1a2b3c4d5e6f is not in the checkout: fetch the base"
        " commit: actions/checkout with fetch-depth: 0\n")
    # The check could not start, and its own record says why (upgrade.json, not a manifest).
    report = json.loads((tmp_path / "repro-gate-out" / "upgrade.json").read_text())
    assert (report["verdict"], report["reasons"][0]["code"]) == ("error", "lockfile")


def test_the_upgrade_inputs_set_the_upgrade_section(tmp_path: Path) -> None:
    inputs = {"INPUT_LOCK": "requirements.txt", "INPUT_INHERIT-SITE-PACKAGES": "True",
              "INPUT_UPGRADE-TOLERANCE": "atol=1e-6,rtol=0", "INPUT_MAX-BISECT-RUNS": "8"}

    upgrade = config.load(None, from_action_inputs(inputs), tmp_path).upgrade

    assert (upgrade.lock, upgrade.inherit_site_packages, upgrade.max_bisect_runs) == (
        "requirements.txt", True, 8)
    assert upgrade.tolerance == ToleranceConfig.from_document({"atol": 1e-6, "rtol": 0.0})
    assert "upgrade" not in from_action_inputs({"INPUT_MODE": "upgrade"})


@pytest.mark.parametrize(("name", "value", "message"), [
    ("INHERIT-SITE-PACKAGES", "yes", "input inherit-site-packages: must be true or false"),
    ("MAX-BISECT-RUNS", "many", "input max-bisect-runs: must be a number, got 'many'"),
    ("MAX-BISECT-RUNS", "0", "upgrade.max_bisect_runs: must be an integer >= 1"),
])
def test_a_bad_upgrade_input_is_a_one_line_configuration_error(
    tmp_path: Path, name: str, value: str, message: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        config.load(None, from_action_inputs({f"INPUT_{name}": value}), tmp_path)

    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_outside_a_pull_request_the_candidate_is_computed_or_given(tmp_path: Path) -> None:
    effective = config.load(None, {}, tmp_path)
    push = {"GITHUB_EVENT_NAME": "schedule"}

    computed = upgrade_options(effective, {**push, "INPUT_UPGRADE-PACKAGES": "numlib, harmless\n"
                                                                             "leaf"})
    everything = upgrade_options(effective, {**push, "INPUT_WRITE-LOCK": "true"})
    given = upgrade_options(effective, {**push, "INPUT_CANDIDATE-LOCK": "pr/uv.lock"})

    assert computed == UpgradeOptions(
        CandidateSource(request=UpgradeRequest(("numlib", "harmless", "leaf"))))
    assert everything == UpgradeOptions(CandidateSource(request=UpgradeRequest()),
                                        write_lock=True)
    assert given == UpgradeOptions(CandidateSource(lock=Path.cwd() / "pr" / "uv.lock"))
