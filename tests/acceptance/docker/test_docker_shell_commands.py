"""Command strings in containers: run by the image's /bin/sh, a clear error when it has none."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from helpers.docker_fixtures import GateContainers, PinnedImage
from helpers.gate_cli import Result, check
from helpers.rootfs import write_rootfs

pytestmark = pytest.mark.docker


@pytest.fixture
def shell_less_image(docker_client: docker.DockerClient, tmp_path: Path) -> Iterator[str]:
    """An image of nothing but /etc/passwd and /etc/group: no /bin/sh."""
    tar_path = tmp_path / "no-shell.tar"
    write_rootfs(tar_path, [], set())
    repository, version = "repro-gate-test/no-shell", uuid.uuid4().hex[:10]
    docker_client.api.import_image_from_file(str(tar_path), repository=repository, tag=version)
    yield f"{repository}:{version}"
    docker_client.images.remove(f"{repository}:{version}", force=True)


def in_container(workspace: Path, gate: str, image: str, command: str) -> Result:
    """`repro-gate check` of a command string in `image`."""
    return check(workspace, "--name", gate, "--image", image, "--gpus", "none", "--no-cost",
                 "--timeout", "120", "--command", command)


def assert_command_not_found(result: Result, message: str) -> None:
    output = result.stdout + result.stderr
    assert result.exit_code == 2, output
    assert "Traceback" not in output and message in output
    reason = result.manifest["reasons"][0]
    assert reason["code"] == "command_not_found"
    assert message in reason["message"] and "\n" not in reason["message"]


def test_an_image_without_a_shell_is_a_clear_error(
    shell_less_image: str, gate_containers: GateContainers, workspace: Path
) -> None:
    result = in_container(workspace, gate_containers.gate, shell_less_image, "python train.py")

    assert_command_not_found(result, (
        f"image {shell_less_image} has no /bin/sh to run the command string;"
        " give the command as a list (`command: [python, train.py]`)"
    ))
    assert gate_containers.list() == []


def test_a_missing_program_in_a_command_string_is_command_not_found(
    python_image: PinnedImage, gate_containers: GateContainers, workspace: Path
) -> None:
    result = in_container(workspace, gate_containers.gate, python_image.reference,
                          "no-such-trainer --epochs 1")

    assert_command_not_found(
        result, "command not found: no-such-trainer --epochs 1 (the shell said: ")
    assert "no-such-trainer: not found" in result.stdout
    assert gate_containers.list() == []


def test_a_command_string_runs_through_the_images_shell(
    python_image: PinnedImage, gate_containers: GateContainers, workspace: Path
) -> None:
    command = ('GREETING=hello python -c "import os; print(os.environ[\'GREETING\'])"'
               ' > "$REPRO_GATE_RUN_DIR/seen.txt" && echo chained')

    result = in_container(workspace, gate_containers.gate, python_image.reference, command)

    assert result.exit_code == 0, result.stdout + result.stderr
    run_dir = workspace / "repro-gate-out/runs/A"
    assert (run_dir / "seen.txt").read_text() == "hello\n"
    assert "chained" in (workspace / "repro-gate-out/logs/A.log").read_text()
    assert result.manifest["runs"][0]["launcher"] == "docker"
    assert gate_containers.list() == []
