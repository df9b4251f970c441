"""Environments in Docker volumes: the volume of a key, what the key depends on, how a build's
check is judged, and what the builds see (no daemon is asked: the client points nowhere)."""

from __future__ import annotations

import dataclasses
import io
import json
import subprocess
import tarfile
from pathlib import Path

import docker
import pytest

from repro_gate.config import Config
from repro_gate.environments.docker_volumes import (
    VOLUME_KEY_LENGTH,
    VOLUME_PREFIX,
    DockerEnvironments,
    _local_links,
    _single_file,
    volume_name,
)
from repro_gate.launch.host_paths import PathTranslator

NOWHERE = docker.DockerClient(base_url="unix:///nonexistent/docker.sock", version="1.44")
PINS = {"numpy": "2.0.1", "torch": "2.4.0"}


def environments(tmp_path: Path, **settings: object) -> DockerEnvironments:
    base = DockerEnvironments(NOWHERE, "sha256:" + "a" * 64, PathTranslator(None),
                              tmp_path / ".tools", "gate")
    return dataclasses.replace(base, **settings)


def check(code: int, stdout: str = "", stderr: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess(["uv"], code, stdout, stderr)


def test_a_volume_is_named_by_the_start_of_its_key() -> None:
    key = "0123456789abcdef" * 4

    assert volume_name(key) == VOLUME_PREFIX + key[:VOLUME_KEY_LENGTH]
    assert len(volume_name(key)) == len(VOLUME_PREFIX) + 24


def test_the_key_depends_on_the_image_the_pins_and_their_sources(tmp_path: Path) -> None:
    base = environments(tmp_path)
    key = base._key(PINS)

    assert base._key(dict(PINS)) == key
    assert environments(tmp_path, index_args=("--no-index", "--find-links", "/w"))._key(
        PINS) != key
    assert environments(tmp_path, image_id="sha256:" + "b" * 64)._key(PINS) != key
    assert base._key({**PINS, "torch": "2.5.0"}) != key
    assert environments(tmp_path, staging_dir=tmp_path / "other")._key(PINS) == key


def test_a_failed_consistency_check_lists_the_tools_problems(tmp_path: Path) -> None:
    judged = environments(tmp_path)._problems(
        check(1, "The package torch requires numpy<2\nChecked 2 packages\n"), PINS)
    silent = environments(tmp_path)._problems(check(2, "", "error: uv crashed"), PINS)

    assert judged == ["The package torch requires numpy<2"]
    assert silent == ["uv crashed"]
    assert environments(tmp_path)._problems(check(0, "Checked 2 packages"), PINS) == []


def test_with_inherited_packages_the_check_is_what_the_interpreter_sees(tmp_path: Path) -> None:
    facts = {"executable": "/opt/env/bin/python", "version": "3.11.7", "site": [],
             "markers": {"python_version": "3.11"},
             "distributions": {"numpy": ["1.26.4", []], "torch": ["2.4.0+cu121", []]}}

    problems = environments(tmp_path, inherit_site_packages=True)._problems(
        check(0, "noise\n" + json.dumps(facts)), PINS)

    assert problems == ["numpy==2.0.1 is pinned, but 1.26.4 is found"]


def test_local_find_links_folders_are_what_the_builds_must_see(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    environ = {"UV_FIND_LINKS": f"{wheels}, https://example.com/links",
               "PIP_FIND_LINKS": f"relative/dir {tmp_path / 'missing'}"}

    assert _local_links(environ) == (wheels,)


def test_the_marker_is_read_from_the_one_file_of_an_archive() -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        data = b'{"key": "k"}'
        info = tarfile.TarInfo("env.json")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))

    assert _single_file(buffer.getvalue()) == '{"key": "k"}'


def test_docker_environments_need_an_image(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="need an image"):
        DockerEnvironments.for_config(Config(workdir=tmp_path, output_dir=tmp_path / "out"))
