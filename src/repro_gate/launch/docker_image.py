"""The training image: resolved once (pulled by digest when absent), recorded in the manifest,
and looked into without running it."""

from __future__ import annotations

from typing import Any

import docker
import docker.errors
import docker.models.images
import requests.exceptions

from repro_gate.errors import ErrorKind, GateError, one_line
from repro_gate.launch import cancel

GO_MODE_DIR = 1 << 31  # the directory bit of the file mode in an archive's stat (Go's)


def resolve(client: docker.DockerClient, reference: str) -> docker.models.images.Image:
    """The image for `reference`: the local one when present, else pulled (by digest if pinned)."""
    try:
        return client.images.get(reference)
    except docker.errors.ImageNotFound:
        pass
    except docker.errors.APIError as error:
        raise GateError(
            f"cannot inspect image {reference}: {explain(error)}", kind=ErrorKind.DOCKER
        ) from None
    try:
        return client.images.pull(reference)
    except (docker.errors.APIError, docker.errors.DockerException) as error:
        raise GateError(
            f"image {reference} not found locally and could not be pulled: {explain(error)}",
            kind=ErrorKind.IMAGE_NOT_FOUND,
        ) from None


def record(reference: str, image: docker.models.images.Image) -> dict[str, object]:
    """What the manifest records about the image: the reference, its ID and its repo digests."""
    return {
        "reference": reference,
        "id": image.id,
        "repo_digests": list(image.attrs.get("RepoDigests") or []),
    }


def environment(image: Any) -> dict[str, str]:
    """The variables the image sets (`ENV`)."""
    pairs = (image.attrs.get("Config") or {}).get("Env") or []
    return dict(pair.split("=", 1) for pair in pairs if "=" in pair)


def find_file(client: docker.DockerClient, image: docker.models.images.Image, reference: str,
              candidates: tuple[str, ...], labels: dict[str, str]) -> str | None:
    """The first of `candidates` that is a file in `image`, seen in a container that is created
    (with `labels`), never started, and removed."""
    try:
        container = client.containers.create(image, ["true"], labels=labels, network_mode="none")
    except docker.errors.APIError as error:
        raise GateError(f"cannot look into image {reference}: {explain(error)}",
                        kind=ErrorKind.DOCKER) from None
    try:
        return next((path for path in candidates if _holds(container, path)), None)
    finally:
        with cancel.deferred():
            container.remove(force=True)


def _holds(container: Any, path: str) -> bool:
    """Whether the (created) container's file system has a file at `path`."""
    try:
        chunks, info = container.get_archive(path)
        for _ in chunks:  # the archive of one library: read to the end, then closed
            pass
    except docker.errors.NotFound:
        return False
    except (docker.errors.APIError, requests.exceptions.RequestException) as error:
        raise GateError(f"cannot look for {path} in the image: {explain(error)}",
                        kind=ErrorKind.DOCKER) from None
    return not int(info.get("mode") or 0) & GO_MODE_DIR


def explain(error: Exception) -> str:
    """The daemon's own explanation of an API error, on one line."""
    return one_line(getattr(error, "explanation", None) or error)
