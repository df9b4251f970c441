"""Which environments a feature builds: on this host, or inside the training image."""

from __future__ import annotations

from repro_gate.config import Config
from repro_gate.environments.docker_volumes import DockerEnvironments
from repro_gate.environments.package_sources import PackageSources
from repro_gate.environments.virtualenvs import BuildEnvironment, LocalEnvironments


def builder_for(config: Config, sources: PackageSources | None = None) -> BuildEnvironment:
    """Where the environments live follows the launcher: on this host, or in the image (the
    upgrade check's cache and `inherit_site_packages` either way); `sources` are where the
    locks' packages come from (their indexes, URLs, commits)."""
    if config.container.image:
        return DockerEnvironments.for_config(config, sources)
    return LocalEnvironments(config.upgrade.cache_path, config.upgrade.inherit_site_packages,
                             sources=sources or PackageSources())
