"""Trainings that try to cheat, each run in its own namespaces (local mode): none gets a PASS,
and each gate says why. One gate per scenario. Where the kernel refuses namespaces, a run
gets a copy and nothing hides the output folder from it: local mode is then forgeable
(docs/security.md), and these scenarios do not apply."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import cheating
from helpers.gate_cli import Result

from repro_gate.launch import namespaces

pytestmark = pytest.mark.skipif(namespaces.refusal(Path("/tmp")) is not None,
                                reason="the kernel refuses user namespaces or overlayfs here")

Gate = tuple[Result, dict[str, Any]]
PYTHON = sys.executable  # the training's interpreter


@pytest.fixture(scope="module")
def handoff(tmp_path_factory: pytest.TempPathFactory) -> Gate:
    workspace = cheating.project(tmp_path_factory.mktemp("handoff") / "workspace")
    return cheating.gate(workspace, cheating.HANDOFF, PYTHON)


@pytest.fixture(scope="module")
def forge(tmp_path_factory: pytest.TempPathFactory) -> Gate:
    workspace = cheating.project(tmp_path_factory.mktemp("forge") / "workspace")
    return cheating.gate(workspace, cheating.FORGE, PYTHON)


@pytest.fixture(scope="module")
def link(tmp_path_factory: pytest.TempPathFactory) -> tuple[Result, dict[str, Any], Path]:
    folder = tmp_path_factory.mktemp("link")
    workspace, output = cheating.project(folder / "workspace"), folder / "out"
    return (*cheating.gate(workspace, cheating.LINK, PYTHON, output=output), output)


def test_no_seed_reaches_run_b_through_the_reference_or_the_workspace(handoff: Gate) -> None:
    cheating.assert_no_seed_handed_off(*handoff)


def test_a_copy_of_run_a_cannot_be_made_and_a_name_clash_is_compared(forge: Gate) -> None:
    cheating.assert_no_copy_and_the_clash_compared(*forge)


def test_a_probe_folder_linked_to_run_as_is_run_tampered(
        link: tuple[Result, dict[str, Any], Path]) -> None:
    cheating.assert_link_is_tampering(*link)
