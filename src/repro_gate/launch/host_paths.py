"""Host paths for sibling containers: bind mounts name paths on the daemon's host.

When the gate itself runs in a container (the action), every path it mounts into a training
container is translated through the gate container's own mounts.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path, PurePosixPath

import docker
import docker.errors

from repro_gate.errors import ErrorKind, GateError, one_line

CONTAINER_ID = re.compile(r"/containers/([0-9a-f]{64})/")
FULL_ID = re.compile(r"^[0-9a-f]{64}$")
CONTAINER_FILES = frozenset({"/etc/hostname", "/etc/hosts", "/etc/resolv.conf"})


class PathTranslator:
    """Maps paths the gate sees to paths on the daemon's host.

    Outside a container they are the same. Inside one, a path is mapped through the longest
    mount destination that contains it; a path under no mount has no host path.
    """

    def __init__(self, mounts: list[tuple[str, str]] | None) -> None:
        # (destination in the gate's container, source on the host), longest first
        self.mounts = None if mounts is None else sorted(mounts, key=lambda m: -len(m[0]))

    def host_path(self, path: Path) -> str | None:
        """The host path of `path`, or None when it is not on any mount."""
        if self.mounts is None:
            return str(path)
        for destination, source in self.mounts:
            try:
                rest = PurePosixPath(path).relative_to(destination)
            except ValueError:
                continue
            return str(PurePosixPath(source) / rest) if str(rest) != "." else source
        return None

    @classmethod
    def for_this_process(cls, client: docker.DockerClient) -> PathTranslator:
        """The translator for wherever the gate runs: on the host, or in a container."""
        container_id = own_container_id()
        if container_id is None:
            return cls(None)
        try:
            attrs = client.containers.get(_full_id(client, container_id)).attrs
        except docker.errors.NotFound:
            return cls(None)  # a container of another daemon: paths are shared as they are
        except docker.errors.APIError as error:
            why = one_line(error.explanation or error)
            raise GateError(
                f"cannot inspect the gate's own container {container_id[:12]}: {why}",
                kind=ErrorKind.DOCKER,
            ) from None
        mounts = [
            (m["Destination"], m["Source"]) for m in attrs.get("Mounts", []) if m.get("Source")
        ]
        return cls(mounts)


def _full_id(client: docker.DockerClient, container_id: str) -> str:
    """The full ID for a short one (the hostname): a runner slot's Docker proxy addresses
    containers by full ID only, and lists only the slot's own."""
    if FULL_ID.match(container_id):
        return container_id
    found = [container.id for container in
             client.containers.list(all=True, filters={"id": container_id})
             if str(container.id).startswith(container_id)]
    if len(found) != 1:
        raise docker.errors.NotFound(f"no container {container_id}")
    return str(found[0])


def own_container_id(mountinfo: Path = Path("/proc/self/mountinfo"),
                     dockerenv: Path = Path("/.dockerenv")) -> str | None:
    """The ID of the Docker container this process runs in, or None on a host."""
    try:
        text = mountinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    # Docker bind-mounts /etc/hostname, /etc/hosts and /etc/resolv.conf from the container's
    # dir. Only those mount points count: on a host whose dockerd shares its mount namespace,
    # other containers' mounts (their shm, say) show up in mountinfo too.
    for line in text.splitlines():
        fields = line.split()
        found = CONTAINER_ID.search(line)
        if found and len(fields) > 4 and fields[4] in CONTAINER_FILES:
            return found.group(1)
    if dockerenv.exists():
        return socket.gethostname()  # Docker's default hostname is the short container ID
    return None
