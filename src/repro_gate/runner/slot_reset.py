"""The reset between two jobs on a slot's own engine: nothing a job made or started outlives it.

    engine killed          its PID namespace ends every process the job started
    data root emptied      containers, their layers, networks, build caches, volumes
                           (engine_data.py), whatever their labels
    engine started again   on the same data root: the kept images need no reload
    images dropped         every image but the runner image and those pinned by digest (and
                           the images they were built from)
    checked                the engine answers and holds no container, no network but its own,
                           no volume but the kept environment caches: what survived is named

Labels decide nothing here: a job can make objects without the slot's label (a container
created past the filter). What is kept on purpose: the runner image, images pulled by digest
(their content is their name), and, on a slot dedicated to one repository, that repository's
environment caches (`repro-gate-env-*` volumes carrying its label), unless a job of another
repository ran since.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any

import docker
import docker.errors
import requests

from repro_gate.environments.docker_volumes import VOLUME_PREFIX
from repro_gate.runner.containers import API_VERSION
from repro_gate.runner.engine_data import empty_job_state
from repro_gate.runner.proxy.ownership import REPOSITORY_LABEL
from repro_gate.runner.proxy.pins import Pins
from repro_gate.runner.slot_engine import SlotEngine
from repro_gate.runner.slot_folders import SlotFolders, wipe

API_SECONDS = 60
ENGINE_NETWORKS = frozenset({"bridge", "host", "none"})  # what an engine starts with


@dataclass(frozen=True)
class Keep:
    """What survives a reset on purpose."""

    runner_image: str  # runner.image: a digest-pinned reference or a bare image ID
    cache_repository: str | None = None  # keep this repository's environment caches


@dataclass(frozen=True)
class ResetReport:
    """How a reset ended: what survived it (nothing, when the slot is fresh), how long it took."""

    survivors: tuple[str, ...]
    seconds: float

    @property
    def fresh(self) -> bool:
        return not self.survivors


def reset_engine(engine: SlotEngine, folders: SlotFolders, keep: Keep,
                 pins: Pins | None = None) -> ResetReport:
    """Kill the slot's engine, empty its data root but for `keep`, start it again, and check
    it; the filter's pins are released, the work and status folders wiped. GateError when the
    engine does not start again."""
    began = time.monotonic()
    engine.kill()
    if pins is not None:
        pins.release_all()
    survivors: list[str] = []
    try:
        empty_job_state(folders.engine_data, keep_volumes=keep.cache_repository is not None)
    except OSError as error:  # the slot stays unhealthy: nothing registers on it
        survivors.append(f"the data root could not be emptied ({error})")
    engine.start()
    wipe(folders.work)
    wipe(folders.status)
    client = docker.DockerClient(base_url=engine.url, version=API_VERSION, timeout=API_SECONDS)
    try:
        _drop_images(client, keep)
        _drop_volumes(client, keep)
        survivors += _survivors(client, keep)
    except (docker.errors.DockerException, requests.RequestException) as error:
        survivors.append(f"the engine's answers could not be checked ({type(error).__name__})")
    finally:
        client.close()
    return ResetReport(tuple(survivors), time.monotonic() - began)


def _kept_image_ids(client: docker.DockerClient, keep: Keep) -> set[str]:
    """The runner image's ID (when present), every image pulled by digest, and the images
    they were built from (an image built on the host names its parent; the engine keeps a
    parent as long as its child)."""
    kept = {str(image["Id"]) for image in client.api.images() if image.get("RepoDigests")}
    with contextlib.suppress(docker.errors.NotFound):  # the service pulls it again
        kept.add(str(client.api.inspect_image(keep.runner_image)["Id"]))
    for image in list(kept):
        parent = str(client.api.inspect_image(image).get("Parent") or "")
        while parent and parent not in kept:
            kept.add(parent)
            parent = str(client.api.inspect_image(parent).get("Parent") or "")
    return kept


def _drop_images(client: docker.DockerClient, keep: Keep) -> None:
    """Every image nothing keeps, and the tags a job may have put on a kept one (a digest
    still names it; the runner image is run by its reference, so its tags stay)."""
    kept = _kept_image_ids(client, keep)
    for image in client.api.images():
        identifier = str(image["Id"])
        if identifier not in kept:
            _quietly(client.api.remove_image, identifier, force=True)
        elif image.get("RepoDigests"):
            for tag in image.get("RepoTags") or []:
                if tag != "<none>:<none>":
                    _quietly(client.api.remove_image, tag, noprune=True)


def _is_kept_cache(volume: dict[str, Any], keep: Keep) -> bool:
    labels = volume.get("Labels") or {}
    return (keep.cache_repository is not None
            and str(volume.get("Name", "")).startswith(VOLUME_PREFIX)
            and labels.get(REPOSITORY_LABEL) == keep.cache_repository)


def _drop_volumes(client: docker.DockerClient, keep: Keep) -> None:
    """With caches kept the volume store stayed: every volume but the kept caches goes."""
    for volume in (client.api.volumes() or {}).get("Volumes") or []:
        if not _is_kept_cache(volume, keep):
            _quietly(client.api.remove_volume, volume["Name"], force=True)


def _survivors(client: docker.DockerClient, keep: Keep) -> list[str]:
    """Whatever the engine still holds that the reset does not keep, in words."""
    found = [f"container {item['Id'][:12]}" for item in client.api.containers(all=True)]
    found += [f"volume {volume['Name']}"
              for volume in (client.api.volumes() or {}).get("Volumes") or []
              if not _is_kept_cache(volume, keep)]
    found += [f"network {network['Name']}" for network in client.api.networks()
              if network["Name"] not in ENGINE_NETWORKS]
    kept = _kept_image_ids(client, keep)
    found += [f"image {image['Id'][:19]}" for image in client.api.images()
              if image["Id"] not in kept]
    return found


def _quietly(action: Any, *args: Any, **options: Any) -> None:
    """A removal the check afterwards judges: a refusal here is a survivor there."""
    with contextlib.suppress(docker.errors.APIError):
        action(*args, **options)
