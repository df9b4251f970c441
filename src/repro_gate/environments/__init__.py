"""Building Python environments from dependency locks, and running in them.

    dependency_lock.py  a lockfile (uv.lock, pinned requirements) -> `Lock` of `LockedPackage`s
    uv_graph.py         a uv.lock's edges: direct packages, those that apply on this interpreter
    virtualenvs.py      cached virtual environments built from pins (`LocalEnvironments`)
    docker_volumes.py   the same inside the training image, in volumes (`DockerEnvironments`)
    docker_build.py     the script that builds one in a sibling container, and its answer
    interpreter.py      what an interpreter sees; pins met (inherit_site_packages)
    package_sources.py  where each locked package comes from (indexes, find-links, URLs, git)
    requirements_sources.py  the same for a requirements file (its options and lines)
    installer.py        running uv (pip as the fallback), one-line failures
    launcher.py         `InEnvironment`: a launcher whose runs use an environment
    builders.py         which builder a configuration gets (this host, or the image)

It sits below gate/, so that every feature that drives the gate (the upgrade check, and the
next ones) can build and use environments: it imports config, errors, parsing, credentials,
fingerprint and launch; never gate, a feature package, publish or cli.
"""

from __future__ import annotations

from repro_gate.environments.dependency_lock import Lock, LockedPackage, find_lock, read_lock
from repro_gate.environments.docker_volumes import DockerEnvironments
from repro_gate.environments.package_sources import PackageSources
from repro_gate.environments.virtualenvs import (
    BuildEnvironment,
    Environment,
    LocalEnvironments,
    pins_sha256,
)

__all__ = [
    "BuildEnvironment",
    "DockerEnvironments",
    "Environment",
    "LocalEnvironments",
    "Lock",
    "LockedPackage",
    "PackageSources",
    "find_lock",
    "pins_sha256",
    "read_lock",
]
