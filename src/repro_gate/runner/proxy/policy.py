"""What a slot's jobs may ask of Docker: the rules the per-slot proxy applies to request bodies.

Each `check_*` function takes a decoded JSON body and the slot's policy and returns the reason
for a refusal (one line naming the rule) or None. docs/runner-proxy.md explains every rule.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Body = Mapping[str, Any]
Rule = Callable[[Body, "SlotPolicy"], "str | None"]

# Modes that would share one of the host's namespaces with the container.
NAMESPACE_MODES = ("NetworkMode", "PidMode", "IpcMode", "UsernsMode", "UTSMode", "CgroupnsMode")
# The security options that pass (`key=value` or the older `key:value`): they keep Docker's
# confinement or tighten it. Anything else is refused: `unconfined`, a custom seccomp
# profile, an SELinux label (`type:spc_t`), a bare `disable`.
SECURITY_OPTIONS = ("no-new-privileges", "no-new-privileges=true", "seccomp=builtin",
                    "apparmor=docker-default")
# The default runtime (runc) only: `nvidia` would honour NVIDIA_VISIBLE_DEVICES from the
# image's own environment, which the proxy never sees.
ALLOWED_RUNTIMES = ("", "runc")
# NVIDIA_VISIBLE_DEVICES values that select no GPU.
NO_GPU = ("void", "none", "")
VOLUME_DRIVERS = ("", "local")
# Where the runner container sees the slot's proxy socket. The runner binds this path into the
# containers it starts (container actions, job containers); to the daemon it would name the
# host's own socket, so a bind of exactly this string is rewritten to the slot's proxy socket.
RUNNER_SOCKETS = ("/var/run/docker.sock", "/run/docker.sock")
NETWORK_DRIVERS = ("", "bridge")
LOG_DRIVERS = ("", "json-file", "local", "none")


@dataclass(frozen=True)
class SlotPolicy:
    """One slot's limits: its GPU, the host folder its jobs may bind, the capabilities allowed.

    `work_folder` is a path on the Docker host (the service sees host paths as they are);
    `protected` paths are never bound, even inside the work folder (the slot's own socket).
    `proxy_socket` is the host path of the slot's proxy socket (serve() sets it): a bind of
    RUNNER_SOCKETS is pointed there; without it such a bind is refused like any other.
    `reserved_names` are name prefixes the service's own containers use (the runner's): a job
    may not create or rename a container to such a name, so it cannot take the next one's.
    `gpu_groups` are added to a container that asks for the GPU (ownership.with_gpu_groups).
    `repository`, on a slot dedicated to one repository, labels every object its jobs create.
    """

    gpu_uuid: str
    work_folder: Path
    allowed_capabilities: frozenset[str] = frozenset()
    protected: frozenset[Path] = field(default_factory=frozenset)
    proxy_socket: Path | None = None
    reserved_names: tuple[str, ...] = ()
    gpu_groups: tuple[str, ...] = ()
    repository: str | None = None


class AmbiguousKeys(ValueError):
    """Two keys of one object that the daemon would take for the same field."""


class Caseless(Mapping[str, Any]):
    """A JSON object read as the daemon reads it: Go's decoder matches keys ignoring case.

    Without this, `{"hostconfig": {"privileged": true}}` would pass the rules and still give a
    privileged container. Keys equal but for case are refused, whichever the daemon would keep.
    """

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data: dict[str, Any] = {}
        for key, value in data.items():
            folded = str(key).casefold()
            if folded in self._data:
                raise AmbiguousKeys(f"keys equal but for case are refused: {key!r}")
            self._data[folded] = _caseless(value)  # eager: an ambiguity anywhere is found now

    def __getitem__(self, key: str) -> Any:
        return self._data[key.casefold()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


def _caseless(value: Any) -> Any:
    if isinstance(value, Mapping) and not isinstance(value, Caseless):
        return Caseless(value)
    if isinstance(value, list):
        return [_caseless(item) for item in value]
    return value


def _host_config(body: Body) -> Body:
    host = body.get("HostConfig")
    return host if isinstance(host, Mapping) else {}


def _items(value: object) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


def check_privileged(body: Body, policy: SlotPolicy) -> str | None:
    """A privileged container sees every device of the host, every GPU included."""
    if _host_config(body).get("Privileged") or body.get("Privileged"):
        return "Privileged is refused: a privileged container sees every device of the host"
    return None


def check_device_requests(resources: Body, policy: SlotPolicy) -> str | None:
    """Only this slot's GPU, by UUID: no count, no `all`, no other driver."""
    for request in _items(resources.get("DeviceRequests")):
        if not isinstance(request, Mapping):
            return "DeviceRequests: each request must be an object"
        driver = request.get("Driver") or ""
        ids = _items(request.get("DeviceIDs"))
        count = request.get("Count") or 0
        if driver not in ("", "nvidia"):
            return f"DeviceRequests: driver {driver!r} is refused (only the slot's NVIDIA GPU)"
        if count != 0:
            return (
                f"DeviceRequests: Count {count} is refused; ask for this slot's GPU by UUID"
                f" (DeviceIDs [{policy.gpu_uuid!r}])"
            )
        if ids != [policy.gpu_uuid]:
            return (
                f"DeviceRequests: DeviceIDs {ids} is refused; this slot may use only"
                f" [{policy.gpu_uuid!r}]"
            )
    return None


def check_devices(resources: Body, policy: SlotPolicy) -> str | None:
    """Host device nodes, or cgroup rules that would let the container create them."""
    if _items(resources.get("Devices")):
        return "HostConfig.Devices is refused: no host device nodes (the GPU comes by UUID)"
    if _items(resources.get("DeviceCgroupRules")):
        return "HostConfig.DeviceCgroupRules is refused: no access to host device nodes"
    return None


def check_resources(resources: Body, policy: SlotPolicy) -> str | None:
    """The device part of a container's resources: the same on create and on update."""
    return check_devices(resources, policy) or check_device_requests(resources, policy)


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def check_host_path(source: str, policy: SlotPolicy, what: str) -> str | None:
    """A host path may be bound only inside the work folder, never onto a protected path."""
    # Docker follows symbolic links in a bind source: judge where the path really leads.
    real = Path(os.path.realpath(source))
    folder = Path(os.path.realpath(policy.work_folder))
    if not _inside(real, folder):
        return f"{what} {source!r} is refused: only paths inside the slot's work folder {folder}"
    for protected in policy.protected:
        if _inside(Path(os.path.realpath(protected)), real):
            return f"{what} {source!r} is refused: it holds the slot's Docker socket"
    return None


def is_runner_socket(source: object, policy: SlotPolicy) -> bool:
    """Whether a bind source is the runner's own socket path, the literal string (see
    RUNNER_SOCKETS): any other spelling (`/var/run/../run/docker.sock`) is judged as a path."""
    return policy.proxy_socket is not None and isinstance(source, str) and source in RUNNER_SOCKETS


def is_runner_socket_bind(entry: object, policy: SlotPolicy) -> bool:
    """Whether a `Binds` entry (`src:dst[:opts]`) binds the runner's own socket path."""
    source, colon, _ = entry.partition(":") if isinstance(entry, str) else ("", "", "")
    return bool(colon) and is_runner_socket(source, policy)


def _bind_source(entry: str) -> str | None:
    """The host path of a `Binds` entry (`src:dst[:opts]`), None for a named volume."""
    source = entry.split(":", 1)[0]
    return source if source.startswith("/") else None


def check_volume_options(driver: str, options: Body, policy: SlotPolicy, what: str) -> str | None:
    """A named volume of the local driver; one that binds a host path obeys the bind rule."""
    if driver not in VOLUME_DRIVERS:
        return f"{what}: volume driver {driver!r} is refused (only the local driver)"
    device = options.get("device")
    if device is None:
        return None
    kind = str(options.get("type") or "")
    if kind == "tmpfs":
        return None
    if kind in ("none", "bind") or "bind" in str(options.get("o") or "").split(","):
        return check_host_path(str(device), policy, f"{what} device")
    return f"{what}: a volume on device {device!r} (type {kind!r}) is refused"


def check_mounts(body: Body, policy: SlotPolicy) -> str | None:
    """Binds and Mounts: host paths inside the work folder only; volumes of the local driver."""
    host = _host_config(body)
    driver = str(host.get("VolumeDriver") or "")
    if driver not in VOLUME_DRIVERS:
        return f"HostConfig.VolumeDriver {driver!r} is refused (only the local driver)"
    for entry in _items(host.get("Binds")):
        if is_runner_socket_bind(entry, policy):
            if ":" in str(policy.proxy_socket):  # the rewritten entry would split elsewhere
                return f"bind {entry!r} is refused: the slot's socket path holds a ':'"
            continue  # rewritten to the slot's proxy socket (ownership.rewritten)
        source = _bind_source(str(entry))
        if source is not None and (reason := check_host_path(source, policy, "bind")):
            return reason
    for mount in _items(host.get("Mounts")):
        if not isinstance(mount, Mapping):
            return "HostConfig.Mounts: each mount must be an object"
        if reason := _check_mount(mount, policy):
            return reason
    return None


def _check_mount(mount: Body, policy: SlotPolicy) -> str | None:
    kind = mount.get("Type") or "volume"
    if kind == "bind" and is_runner_socket(mount.get("Source"), policy):
        return None  # rewritten to the slot's proxy socket (ownership.rewritten)
    if kind == "bind":
        return check_host_path(str(mount.get("Source") or ""), policy, "bind mount")
    if kind == "volume":
        options = (mount.get("VolumeOptions") or {}).get("DriverConfig") or {}
        driver = str(options.get("Name") or "")
        return check_volume_options(driver, options.get("Options") or {}, policy, "volume mount")
    if kind == "tmpfs":
        return None
    return f"mount type {kind!r} is refused (bind, volume and tmpfs only)"


def _capability(name: object) -> str:
    text = str(name).upper()
    return text.removeprefix("CAP_")


def check_capabilities(body: Body, policy: SlotPolicy) -> str | None:
    """CapAdd only from the policy's allowed set (empty by default: Docker's defaults stand)."""
    allowed = {_capability(name) for name in policy.allowed_capabilities}
    for name in _items(_host_config(body).get("CapAdd")):
        if _capability(name) not in allowed:
            shown = ", ".join(sorted(allowed)) or "none"
            return f"HostConfig.CapAdd {name!r} is refused (allowed: {shown})"
    return None


def check_namespaces(body: Body, policy: SlotPolicy) -> str | None:
    """No namespace shared with the host."""
    host = _host_config(body)
    for key in NAMESPACE_MODES:
        if str(host.get(key) or "").lower() == "host":
            return f"HostConfig.{key} 'host' is refused: the container would share the host's"
    # Newer daemons take the network mode from a lone endpoint when none is given.
    networking = body.get("NetworkingConfig") or {}
    endpoints = networking.get("EndpointsConfig") if isinstance(networking, Mapping) else None
    if isinstance(endpoints, Mapping) and "host" in endpoints:
        return "NetworkingConfig.EndpointsConfig 'host' is refused: the host's network"
    return None


def check_security_options(body: Body, policy: SlotPolicy) -> str | None:
    """Confinement stays on: Docker's own seccomp and AppArmor profiles, no SELinux labels."""
    host = _host_config(body)
    for option in _items(host.get("SecurityOpt")):
        text = str(option)
        if text.replace(":", "=", 1) not in SECURITY_OPTIONS:
            allowed = ", ".join(SECURITY_OPTIONS)
            return (f"HostConfig.SecurityOpt {text[:60]!r} is refused: confinement stays on"
                    f" (allowed: {allowed})")
    for key in ("MaskedPaths", "ReadonlyPaths"):
        if host.get(key) is not None:
            return f"HostConfig.{key} is refused: Docker's defaults for /proc and /sys stand"
    return None


def check_name(name: str, policy: SlotPolicy) -> str | None:
    """A container name the service keeps for its own containers (`reserved_names`)."""
    bare = name.removeprefix("/")
    for prefix in policy.reserved_names:
        if bare.startswith(prefix):
            return f"container name {name!r} is refused: names {prefix}… are the runner's"
    return None


def check_runtime(body: Body, policy: SlotPolicy) -> str | None:
    """The default runtime only (see ALLOWED_RUNTIMES)."""
    runtime = str(_host_config(body).get("Runtime") or "")
    if runtime not in ALLOWED_RUNTIMES:
        return (
            f"HostConfig.Runtime {runtime!r} is refused: the default runtime only"
            " (the slot's GPU comes through a device request)"
        )
    return None


def check_environment(body: Body, policy: SlotPolicy) -> str | None:
    """NVIDIA_VISIBLE_DEVICES may name this slot's GPU or none, never another or `all`."""
    for entry in _items(body.get("Env")):
        name, _, value = str(entry).partition("=")
        if name == "NVIDIA_VISIBLE_DEVICES" and value not in (*NO_GPU, policy.gpu_uuid):
            return f"Env NVIDIA_VISIBLE_DEVICES={value!r} is refused: only {policy.gpu_uuid!r}"
    return None


def check_host_settings(body: Body, policy: SlotPolicy) -> str | None:
    """A cgroup parent would move the container out of Docker's own cgroup tree; a log driver
    other than a local one would make the daemon connect where the job says."""
    host = _host_config(body)
    if host.get("CgroupParent"):
        return "HostConfig.CgroupParent is refused"
    logs = host.get("LogConfig")
    driver = str(logs.get("Type") or "") if isinstance(logs, Mapping) else ""
    if driver not in LOG_DRIVERS:
        return (f"HostConfig.LogConfig.Type {driver!r} is refused: local log drivers only"
                f" ({', '.join(LOG_DRIVERS[1:])})")
    return None


CREATE_RULES: tuple[Rule, ...] = (
    check_privileged,
    lambda body, policy: check_resources(_host_config(body), policy),
    check_mounts,
    check_capabilities,
    check_namespaces,
    check_security_options,
    check_runtime,
    check_environment,
    check_host_settings,
)


def _checked(rules: Iterable[Rule], body: Body, policy: SlotPolicy) -> str | None:
    """The first rule's refusal, judged on the body as the daemon will read it."""
    try:
        view = Caseless(body)
    except AmbiguousKeys as error:
        return str(error)
    for rule in rules:
        if reason := rule(view, policy):
            return reason
    return None


def check_create(body: dict[str, Any], policy: SlotPolicy) -> str | None:
    """POST /containers/create: the reason to refuse it, or None to pass it on."""
    # Docker 20.10 to 24 also read host settings from the top level of the body (a deprecated
    # embedded HostConfig, used when `HostConfig` is absent): the rules see that one too.
    top = {key: value for key, value in body.items() if str(key).casefold() != "hostconfig"}
    return _checked(CREATE_RULES, body, policy) or _checked(
        CREATE_RULES, {**top, "HostConfig": top}, policy
    )


def check_update(body: dict[str, Any], policy: SlotPolicy) -> str | None:
    """POST /containers/{id}/update: limits pass; devices follow the create rules."""
    return _checked((check_resources,), body, policy)


def check_exec(body: dict[str, Any], policy: SlotPolicy) -> str | None:
    """POST /containers/{id}/exec: no privileged process in any container."""
    return _checked((check_privileged,), body, policy)


def check_volume_create(body: dict[str, Any], policy: SlotPolicy) -> str | None:
    """POST /volumes/create: local volumes; a bind-backed one only inside the work folder."""
    return _checked((_check_volume_body,), body, policy)


def _check_volume_body(body: Body, policy: SlotPolicy) -> str | None:
    options = body.get("DriverOpts") or {}
    if not isinstance(options, Mapping):
        return "DriverOpts must be an object"
    return check_volume_options(str(body.get("Driver") or ""), options, policy, "volume")


def check_network_create(body: dict[str, Any], policy: SlotPolicy) -> str | None:
    """POST /networks/create: bridge networks only (macvlan/ipvlan reach the host's LAN)."""
    return _checked((_check_network_body,), body, policy)


def _check_network_body(body: Body, policy: SlotPolicy) -> str | None:
    driver = str(body.get("Driver") or "")
    if driver not in NETWORK_DRIVERS:
        return f"network driver {driver!r} is refused (bridge only)"
    return None


def check_connect(body: dict[str, Any], policy: SlotPolicy) -> str | None:
    """POST /networks/{id}/connect: only whose container it is matters (ownership.py)."""
    return _checked((), body, policy)
