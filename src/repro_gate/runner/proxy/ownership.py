"""Which containers belong to the slot: those it created, and those carrying its label.

Every container, volume and network created through a slot's proxy gets
`org.repro-gate.slot=<the slot's GPU UUID>` (the service gives its runner container the same
label), and a container's ID is recorded (`Owned`); a named volume a create would make
implicitly (`Binds: ["name:/x"]`, a `volume` mount) is created first, labelled
(`implicit_volumes`). The reset between jobs removes everything whatever its labels: the
labels say whose an object is while a job runs. A
request that names a container by its full ID, directly or inside a body (`--pid
container:…`, a network connect), is passed only for the slot's own: exec into another slot's
runner would reach that slot's GPU. Listings, the event stream and network inspects are
narrowed to the slot's containers. A create body is rewritten here too: the slot's label, and
the runner's own socket path pointed at the slot's proxy socket (`with_slot_socket`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from repro_gate.runner.proxy.policy import (
    SlotPolicy,
    is_runner_socket,
    is_runner_socket_bind,
)

SLOT_LABEL = "org.repro-gate.slot"
# On a slot dedicated to one repository (runner.yml `isolation.dedicated_repository`): the
# repository whose jobs made the volume; the reset keeps only environment caches carrying it.
REPOSITORY_LABEL = "org.repro-gate.repository"
SHARED_MODES = ("NetworkMode", "PidMode", "IpcMode")


def slot_labels(policy: SlotPolicy) -> dict[str, str]:
    """The labels every object a job creates carries (a job's own values are overwritten)."""
    labels = {SLOT_LABEL: policy.gpu_uuid}
    if policy.repository is not None:
        labels[REPOSITORY_LABEL] = policy.repository
    return labels


def labelled(body: Mapping[str, Any], policy: SlotPolicy) -> dict[str, Any]:
    """A create body (container, volume, network) with the slot's labels set."""
    labels: dict[str, Any] = {}
    rest = {}
    for key, value in body.items():
        if key.casefold() == "labels":  # the daemon reads any spelling of the key
            labels.update(value if isinstance(value, Mapping) else {})
        else:
            rest[key] = value
    return {**rest, "Labels": {**labels, **slot_labels(policy)}}


def implicit_volumes(body: Mapping[str, Any]) -> list[str]:
    """The named volumes a container create would make if missing, unlabelled: `Binds`
    entries `name:/x[:opts]` and `Mounts` of type `volume` with a `Source`, in `HostConfig`
    and at the top level (where Docker before 25 also reads them). The proxy creates each
    first, with the slot's labels; one that exists already is left as it is."""
    names: list[str] = []
    for settings in (body, body.get("HostConfig")):
        if not isinstance(settings, Mapping):
            continue
        for entry in settings.get("Binds") or []:
            source, colon, _ = str(entry).partition(":")
            if colon and source and not source.startswith("/"):
                names.append(source)
        for mount in settings.get("Mounts") or []:
            source = str(mount.get("Source") or "") if isinstance(mount, Mapping) else ""
            if source and (mount.get("Type") or "volume") == "volume":
                names.append(source)
    return list(dict.fromkeys(names))


def with_gpu_groups(body: Mapping[str, Any], policy: SlotPolicy) -> dict[str, Any]:
    """A create that asks for the GPU gets the slot's `gpu_groups` added: on a slot's own
    engine the GPU's device node belongs to the slot's group, which is group 0 in the
    container, and a container's non-root user reaches the GPU only through it."""
    host = body.get("HostConfig")
    if not policy.gpu_groups or not isinstance(host, Mapping) or not host.get("DeviceRequests"):
        return dict(body)
    groups = [str(group) for group in host.get("GroupAdd") or []]
    added = groups + [group for group in policy.gpu_groups if group not in groups]
    return {**body, "HostConfig": {**host, "GroupAdd": added}}


def with_slot_socket(body: Mapping[str, Any], policy: SlotPolicy) -> dict[str, Any]:
    """The create body with each bind of the runner's socket path (RUNNER_SOCKETS) pointed at
    the slot's proxy socket: a container action gets the same confined socket, one level down.

    Keys are matched ignoring case, in `HostConfig` and at the top level, exactly where
    check_mounts let such a bind pass: a bind it passed is never forwarded unchanged.
    """
    rewritten = _socket_rewritten(body, policy)
    for key, value in body.items():
        if str(key).casefold() == "hostconfig" and isinstance(value, Mapping):
            rewritten[key] = _socket_rewritten(value, policy)
    return rewritten


def _socket_rewritten(settings: Mapping[str, Any], policy: SlotPolicy) -> dict[str, Any]:
    rewritten = dict(settings)
    for key, value in settings.items():
        if str(key).casefold() == "binds" and isinstance(value, list):
            rewritten[key] = [
                f"{policy.proxy_socket}:{entry.partition(':')[2]}"
                if is_runner_socket_bind(entry, policy) else entry
                for entry in value
            ]
        elif str(key).casefold() == "mounts" and isinstance(value, list):
            rewritten[key] = [_mount_rewritten(mount, policy) for mount in value]
    return rewritten


def _mount_rewritten(mount: object, policy: SlotPolicy) -> object:
    """A `Mounts` entry of type bind from the runner's socket path, sourced from the proxy's."""
    if not isinstance(mount, Mapping):
        return mount
    keys = {str(key).casefold(): key for key in mount}
    kind = mount.get(keys.get("type", "Type"))
    source_key = keys.get("source", "Source")
    if kind != "bind" or not is_runner_socket(mount.get(source_key), policy):
        return mount
    return {**mount, source_key: str(policy.proxy_socket)}


def referenced_containers(body: Mapping[str, Any]) -> list[str]:
    """Containers a rebuilt body names: a network connect's, `container:` namespace modes."""
    names = [str(body["Container"])] if body.get("Container") else []
    host = body.get("HostConfig")
    for key in SHARED_MODES:
        mode = str((host or {}).get(key) or "") if isinstance(host, Mapping) else ""
        if mode.startswith("container:"):
            names.append(mode.removeprefix("container:"))
    return names


@dataclass
class Owned:
    """What the slot created through its proxy (container and exec IDs, from the daemon's
    answers) and the labelled containers found by their exact ID (the runner's own)."""

    containers: set[str] = field(default_factory=set)
    execs: set[str] = field(default_factory=set)


def narrowed_network(body: bytes, owned: Owned) -> bytes:
    """A network inspect's answer (or a listing's: before API 1.28 it holds them too) with
    only the slot's own containers in `Containers`."""
    try:
        found = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return b"{}"
    for network in found if isinstance(found, list) else [found]:
        if isinstance(network, dict) and isinstance(network.get("Containers"), dict):
            network["Containers"] = {key: value for key, value in network["Containers"].items()
                                     if key in owned.containers}
    return json.dumps(found).encode()


def is_owned(container: Mapping[str, Any], wanted: str, policy: SlotPolicy) -> bool:
    """Whether an inspected container is exactly `wanted` and carries this slot's label."""
    labels = (container.get("Config") or {}).get("Labels") or {}
    return container.get("Id") == wanted and labels.get(SLOT_LABEL) == policy.gpu_uuid


def scoped(target: str, policy: SlotPolicy) -> str:
    """The request target with its `filters` narrowed to the slot's label (list, events)."""
    parts = urlsplit(target)
    query = parse_qsl(parts.query, keep_blank_values=True)
    filters: dict[str, Any] = {}
    for name, value in query:
        if name == "filters" and value:
            filters = json.loads(value)
    wanted = f"{SLOT_LABEL}={policy.gpu_uuid}"
    labels = filters.get("label", [])
    # The daemon takes both `["k=v"]` and the older `{"k=v": true}`.
    filters["label"] = {**labels, wanted: True} if isinstance(labels, dict) else [*labels, wanted]
    query = [(name, value) for name, value in query if name != "filters"]
    query.append(("filters", json.dumps(filters)))
    return urlunsplit(parts._replace(query=urlencode(query)))
