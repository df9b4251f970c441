"""Trainings that try to cheat, each run in its own container (Docker mode, the default
configuration otherwise): none gets a PASS, and each gate says why. One gate per scenario."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
from helpers import cheating
from helpers.docker_fixtures import TEST_LABEL, PinnedImage
from helpers.gate_cli import Result

pytestmark = pytest.mark.docker

Gate = tuple[Result, dict[str, Any]]
PYTHON = "python"  # the training's interpreter


@pytest.fixture(scope="module")
def containers(torch_image: PinnedImage, docker_client: docker.DockerClient
               ) -> Iterator[tuple[str, ...]]:
    """The launcher's flags: the torch image, no GPU, a gate name of this module's own; no
    container of it is left once its gates ended."""
    name = f"test-{uuid.uuid4().hex[:10]}"
    yield ("--name", name, "--image", torch_image.reference, "--gpus", "none",
           "--timeout", "180")
    assert docker_client.containers.list(all=True, filters={"label": f"{TEST_LABEL}={name}"}) == []


@pytest.fixture(scope="module")
def handoff(containers: tuple[str, ...], tmp_path_factory: pytest.TempPathFactory) -> Gate:
    workspace = cheating.project(tmp_path_factory.mktemp("handoff") / "workspace")
    return cheating.gate(workspace, cheating.HANDOFF, PYTHON, *containers)


@pytest.fixture(scope="module")
def forge(containers: tuple[str, ...], tmp_path_factory: pytest.TempPathFactory) -> Gate:
    workspace = cheating.project(tmp_path_factory.mktemp("forge") / "workspace")
    return cheating.gate(workspace, cheating.FORGE, PYTHON, *containers)


@pytest.fixture(scope="module")
def link(containers: tuple[str, ...], tmp_path_factory: pytest.TempPathFactory
         ) -> tuple[Result, dict[str, Any], Path]:
    folder = tmp_path_factory.mktemp("link")
    workspace, output = cheating.project(folder / "workspace"), folder / "out"
    return (*cheating.gate(workspace, cheating.LINK, PYTHON, *containers, output=output), output)


def test_no_seed_reaches_run_b_through_the_reference_or_the_workspace(handoff: Gate) -> None:
    cheating.assert_no_seed_handed_off(*handoff)
    for run in handoff[1]["runs"]:
        assert run["launcher"] == "docker"


def test_a_copy_of_run_a_cannot_be_made_and_a_name_clash_is_compared(forge: Gate) -> None:
    cheating.assert_no_copy_and_the_clash_compared(*forge)


def test_a_probe_folder_linked_to_run_as_is_run_tampered(
        link: tuple[Result, dict[str, Any], Path]) -> None:
    cheating.assert_link_is_tampering(*link)
