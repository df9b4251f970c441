"""`repro-gate check` with `image:`: the embedded reference training in a digest-pinned image."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.docker_fixtures import GateContainers, PinnedImage
from helpers.paths import TRAININGS

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_digest_pinned_reference_training_passes_and_records_the_image(
    torch_image: PinnedImage, gate_containers: GateContainers, workspace: Path
) -> None:
    command = [
        sys.executable, "-m", "repro_gate", "check", "--quiet",
        "--name", gate_containers.gate,
        "--image", torch_image.reference,
        "--gpus", "none",
        "--steps", "5",
        "--no-cost",
        "--timeout", "180",
    ]

    result = subprocess.run(command, cwd=workspace, capture_output=True, text=True, timeout=400)

    assert result.returncode == 0, result.stdout + result.stderr
    manifest = json.loads((workspace / "repro-gate-out" / "manifest.json").read_text())
    assert manifest["verdict"] == "pass"
    assert manifest["comparison"]["trajectory"] == {
        **manifest["comparison"]["trajectory"], "status": "equal", "steps_compared": 5
    }
    assert [run["name"] for run in manifest["runs"]] == ["A", "B"]
    for run in manifest["runs"]:
        assert run["launcher"] == "docker"
        assert run["steps"] == 5
        image = run["container"]["image"]
        assert image["reference"] == torch_image.reference
        assert image["id"] == torch_image.image_id
        assert torch_image.repo_digest in image["repo_digests"]
        assert run["container"]["user"] == "65534:65534"
    assert gate_containers.list() == []


def test_an_unmodified_training_writes_next_to_itself_in_its_own_copy(
    torch_image: PinnedImage, gate_containers: GateContainers, workspace: Path
) -> None:
    """The workspace stays read-only; each run starts in its own writable working copy, so a
    training that resumes from checkpoints/last.pt never sees another run's."""
    for name in ("tiny.py", "resume_from_checkpoint.py"):
        shutil.copy(TRAININGS / name, workspace / name)
    command = [
        sys.executable, "-m", "repro_gate", "check", "--quiet",
        "--name", gate_containers.gate, "--image", torch_image.reference, "--gpus", "none",
        "--no-cost", "--timeout", "180", "--", "python", "resume_from_checkpoint.py",
    ]

    result = subprocess.run(command, cwd=workspace, capture_output=True, text=True, timeout=400)

    assert result.returncode == 0, result.stdout + result.stderr
    output = workspace / "repro-gate-out"
    manifest = json.loads((output / "manifest.json").read_text())
    for run in manifest["runs"]:
        assert "resume found: False" in (output / "logs" / f"{run['name']}.log").read_text()
        assert {a["path"] for a in run["artifacts"]} == {"model.pt"}, run
        assert (Path(run["run_dir"]) / "work" / "checkpoints" / "last.pt").is_file()
    assert sorted(p.name for p in workspace.iterdir()) == [
        ".repro-gate-workdir", "repro-gate-out", "resume_from_checkpoint.py", "tiny.py"]
    assert gate_containers.list() == []
