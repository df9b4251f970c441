"""Which environments a configuration builds: on this host without an image, in the image's
volumes with one."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro_gate.config import Config, ContainerConfig
from repro_gate.config.model import UpgradeConfig
from repro_gate.environments.builders import builder_for
from repro_gate.environments.package_sources import Origin, PackageSources
from repro_gate.environments.virtualenvs import LocalEnvironments
from repro_gate.errors import ErrorKind, GateError


def test_without_an_image_environments_live_in_the_configured_cache(tmp_path: Path) -> None:
    sources = PackageSources({("numpy", "2.0.1"): Origin((), "numpy==2.0.1")})
    config = Config(workdir=tmp_path, output_dir=tmp_path / "out",
                    upgrade=UpgradeConfig(inherit_site_packages=True,
                                          cache_dir=str(tmp_path / "envs")))

    build = builder_for(config, sources)

    assert isinstance(build, LocalEnvironments)
    assert build.cache_dir == tmp_path / "envs"
    assert build.inherit_site_packages is True
    assert build.sources is sources


def test_without_sources_a_local_builder_knows_no_origins(tmp_path: Path) -> None:
    build = builder_for(Config(workdir=tmp_path, output_dir=tmp_path / "out"))

    assert isinstance(build, LocalEnvironments)
    assert build.sources == PackageSources()
    assert build.cache_dir == Path.home() / ".cache" / "repro-gate" / "envs"


def test_with_an_image_the_builder_goes_to_the_docker_daemon(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    config = Config(workdir=tmp_path, output_dir=tmp_path / "out",
                    container=ContainerConfig(image="registry.example/t:1"))

    with pytest.raises(GateError) as raised:
        builder_for(config)

    assert raised.value.kind == ErrorKind.DOCKER
    assert "cannot reach the Docker daemon at unix:///nonexistent/docker.sock" in (
        raised.value.message)
