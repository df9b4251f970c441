"""The action's metadata, Dockerfile and example workflows pass the validators GitHub users run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPOSITORY_ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((REPOSITORY_ROOT / "examples" / "workflows").glob("*.yml"))
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
        "first-divergent-step",
    }


def test_example_workflows_match_the_workflow_schema() -> None:
    result = run(tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
                 *map(str, WORKFLOWS))

    assert len(WORKFLOWS) >= 4
    assert result.returncode == 0, result.stdout + result.stderr


def test_example_workflows_pass_the_offline_security_audit() -> None:
    result = run(tool("zizmor"), "--offline", "--no-progress", *map(str, WORKFLOWS), "action.yml")

    assert result.returncode == 0, result.stdout + result.stderr


def test_dockerfile_passes_hadolint() -> None:
    result = run(tool("hadolint"), "Dockerfile")

    assert result.returncode == 0, result.stdout + result.stderr
    dockerfile = (REPOSITORY_ROOT / "Dockerfile").read_text()
    assert 'ENTRYPOINT ["repro-gate", "action"]' in dockerfile
    assert "ARG BASE_IMAGE=python:3.12-slim@sha256:" in dockerfile
