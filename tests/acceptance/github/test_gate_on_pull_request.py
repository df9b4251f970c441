"""A real `repro-gate check` on a pull-request event, reporting to the validating fake API."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from helpers.fake_github import FakeGitHub
from helpers.github_env import HEAD_SHA, PR_NUMBER, actions_environment
from helpers.paths import TRAININGS


def run_gate(env: dict[str, str], workspace: Path) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_"))}
    return subprocess.run(
        [sys.executable, "-m", "repro_gate", "check", "--quiet", "--report-timeout", "10",
         "--", sys.executable, "put_op.py"],
        cwd=workspace, env={**base, **env}, capture_output=True, text=True, timeout=300,
        check=False,
    )


def test_gate_leaves_one_check_run_one_comment_and_a_summary(
    tmp_path: Path, github: FakeGitHub
) -> None:
    env = actions_environment(tmp_path, github.base_url)
    workspace = Path(env["GITHUB_WORKSPACE"])
    for name in ("put_op.py", "tiny.py"):
        shutil.copy(TRAININGS / name, workspace / name)
    env["GITHUB_STEP_SUMMARY"] = str(tmp_path / "summary.md")
    env["GITHUB_OUTPUT"] = str(tmp_path / "output.txt")

    for _ in range(2):  # a second push to the pull request updates, it does not add
        completed = run_gate(env, workspace)
        assert completed.returncode == 0, completed.stdout + completed.stderr

    # Two gate runs, each one check run on the pull request's head commit, never the merge commit.
    assert len(github.check_runs) == 2
    for run_id, run in github.check_runs.items():
        assert (run["name"], run["head_sha"]) == ("repro-gate", HEAD_SHA)
        assert (run["status"], run["conclusion"]) == ("completed", "success")
        (annotation,) = github.annotations[run_id]
        assert (annotation["path"], annotation["start_line"]) == ("put_op.py", 10)
        assert "put_" in annotation["message"]
    (comment,) = github.comments[PR_NUMBER]
    assert "bit-for-bit reproducible" in comment["body"].splitlines()[0]
    manifest = json.loads((workspace / "repro-gate-out" / "manifest.json").read_text())
    assert manifest["reporting"]["ok"] is True
    assert manifest["reporting"]["sha"] == HEAD_SHA
    summary = (tmp_path / "summary.md").read_text()
    assert "put_op.py" in summary
    outputs = (tmp_path / "output.txt").read_text().splitlines()
    verdict_at = next(i for i, line in enumerate(outputs) if line.startswith("verdict<<"))
    assert outputs[verdict_at + 1] == "pass"  # the first of the two runs' outputs


def test_api_down_keeps_the_verdict_and_the_manifest(tmp_path: Path) -> None:
    env = actions_environment(tmp_path, "http://127.0.0.1:9")  # nothing listens on port 9
    workspace = Path(env["GITHUB_WORKSPACE"])
    for name in ("put_op.py", "tiny.py"):
        shutil.copy(TRAININGS / name, workspace / name)
    completed = subprocess.run(
        [sys.executable, "-m", "repro_gate", "check", "--quiet", "--report-timeout", "2",
         "--", sys.executable, "put_op.py"],
        cwd=workspace, env={**os.environ, **env}, capture_output=True, text=True, timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    manifest = json.loads((workspace / "repro-gate-out" / "manifest.json").read_text())
    assert manifest["verdict"] == "pass"
    assert manifest["reporting"]["ok"] is False
    assert manifest["reporting"]["errors"]
