"""The action's metadata, Dockerfile and example workflows pass the validators GitHub users run."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers.paths import ROOT

REPOSITORY_ROOT = ROOT
WORKFLOWS = sorted((REPOSITORY_ROOT / "examples" / "workflows").glob("*.yml"))
# The project's own: CI and the release pipeline, and Dependabot's configuration.
PROJECT_WORKFLOWS = sorted((REPOSITORY_ROOT / ".github" / "workflows").glob("*.yml"))
DEPENDABOT = ".github/dependabot.yml"
BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    """A validator installed with the test extras (next to the interpreter, or on PATH)."""
    found = shutil.which(name, path=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{name} is not installed (pip install -e '.[test]')")
        pytest.skip(f"{name} is not installed")
    return found


def run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=REPOSITORY_ROOT, capture_output=True, text=True, check=False)


def test_action_metadata_matches_the_github_actions_schema() -> None:
    result = run(
        tool("check-jsonschema"), "--builtin-schema", "vendor.github-actions", "action.yml"
    )

    assert result.returncode == 0, result.stdout + result.stderr


def test_action_declares_what_the_entrypoint_reads_and_writes() -> None:
    action = yaml.safe_load((REPOSITORY_ROOT / "action.yml").read_text())

    assert action["runs"] == {"using": "docker", "image": "Dockerfile"}
    assert {"config", "command", "image", "gpus", "artifacts", "runs", "tolerance", "timeout",
            "github-token", "pushgateway-url", "baseline", "network"} <= set(action["inputs"])
    assert action["inputs"]["github-token"]["default"] == "${{ github.token }}"
    assert set(action["outputs"]) == {
        "verdict", "cost-pct", "cost-status", "config-hash", "manifest-path",
        "first-divergent-step", "upgrade-verdict", "upgrade-report", "culprits",
        "subject-path", "predicate-type", "predicate-path",
    }


def test_example_workflows_match_the_workflow_schema() -> None:
    result = run(tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
                 *map(str, WORKFLOWS))

    assert len(WORKFLOWS) >= 4
    assert result.returncode == 0, result.stdout + result.stderr


def test_project_workflows_and_dependabot_match_their_schemas() -> None:
    workflows = run(tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
                    *map(str, PROJECT_WORKFLOWS))
    dependabot = run(tool("check-jsonschema"), "--builtin-schema", "vendor.dependabot", DEPENDABOT)

    assert {"ci.yml", "release.yml"} <= {path.name for path in PROJECT_WORKFLOWS}
    assert workflows.returncode == 0, workflows.stdout + workflows.stderr
    assert dependabot.returncode == 0, dependabot.stdout + dependabot.stderr


def test_example_workflows_use_only_what_the_action_declares() -> None:
    """Every input given to the action and every output read from it exists in action.yml; an
    upgrade check on pull requests fetches the history that holds the base commit's lock."""
    action = yaml.safe_load((REPOSITORY_ROOT / "action.yml").read_text())
    modes = set()
    for workflow in WORKFLOWS:
        text = workflow.read_text()
        for job in yaml.safe_load(text)["jobs"].values():
            steps = job.get("steps", [])
            ours = [s for s in steps if s.get("uses", "").startswith("example-org/repro-gate@")]
            for step in ours:
                inputs = step.get("with", {})
                assert set(inputs) <= set(action["inputs"]), workflow.name
                modes.add(inputs.get("mode", "check"))
                for output in re.findall(rf"steps\.{step.get('id')}\.outputs\.([\w-]+)", text):
                    assert output in action["outputs"], (workflow.name, output)
            if any(s.get("with", {}).get("mode") == "upgrade" for s in ours) and (
                    "pull_request" in yaml.safe_load(text)[True]):
                checkout = next(s for s in steps if s.get("uses", "").startswith(
                    "actions/checkout@"))
                assert checkout["with"]["fetch-depth"] == 0, workflow.name
    assert modes == {"check", "upgrade"}


def test_example_workflows_pass_the_offline_security_audit() -> None:
    result = run(tool("zizmor"), "--offline", "--no-progress", *map(str, WORKFLOWS),
                 *map(str, PROJECT_WORKFLOWS), DEPENDABOT, "action.yml")

    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_passes_hadolint() -> None:
    result = run(tool("hadolint"), "Dockerfile")

    assert result.returncode == 0, result.stdout + result.stderr
    dockerfile = (REPOSITORY_ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["repro-gate", "action"]' in dockerfile
    # Dependabot updates the base only on a literal FROM line (it reads no ARG there).
    assert re.search(r"^FROM python:3\.12-slim@sha256:[0-9a-f]{64} AS base$", dockerfile,
                     re.MULTILINE)
