"""Launchers start one training run: locally as a subprocess, or as a sibling Docker container."""

from __future__ import annotations

from repro_gate.config import Config
from repro_gate.launch.base import Launcher
from repro_gate.launch.local import LocalLauncher


def launcher_for(config: Config) -> Launcher:
    """Docker when an image is configured, else a local subprocess."""
    if config.container.image:
        from repro_gate.launch.docker import DockerLauncher  # needs the docker SDK

        return DockerLauncher.connect(config.container, config.name)
    return LocalLauncher()
