"""Every JSON body the proxy forwards is one it wrote: decoded strictly, rebuilt from an
allow-list of the fields each endpoint takes, then checked by the slot's rules (policy.py).

The daemon's JSON decoder matches keys ignoring case and keeps the last of two equal keys; the
proxy refuses both (a key must be spelled as the Engine API spells it, once), and any key it
does not know. A field that must stay empty (`Links`, `VolumesFrom`, `Devices`, …) passes only
as null, "", [] or {}, and is left out of the body forwarded.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Union


class Leaf(Enum):
    """A field's value that holds no keys of its own."""

    SCALAR = "scalar"  # a string, number, boolean or null
    EMPTY = "empty"  # must be empty: null, "", 0, false, [] or {}; dropped
    NULL = "null"  # must be null or absent (an empty list would mean "none", not "default")


@dataclass(frozen=True)
class Obj:
    """An object with known keys, spelled exactly."""

    fields: Mapping[str, Field]


@dataclass(frozen=True)
class ListOf:
    item: Field


@dataclass(frozen=True)
class MapOf:
    """An object whose keys are data (labels, ports, network names)."""

    value: Field


Field = Union[Leaf, Obj, ListOf, MapOf]  # noqa: UP007 (a forward reference)
S, E, N = Leaf.SCALAR, Leaf.EMPTY, Leaf.NULL
SCALARS = ListOf(S)


# Why a field that must stay empty does (shown in the refusal).
EMPTY_REASONS = {
    "Links": "it would copy another container's environment into this one",
    "VolumesFrom": "it would carry another container's folders",
    "CgroupParent": "the container would leave Docker's cgroup tree (and its limits)",
    "Cgroup": "the container would join another cgroup",
    "Devices": "no host device nodes (the GPU comes by UUID)",
    "DeviceCgroupRules": "no access to host device nodes",
    "DriverOpts": "volume and network driver options are refused (they can mount host paths)",
    "Options": "driver options are refused",
    "Subpath": "volume subpaths are refused",
    "Sysctls": "kernel parameters stay Docker's",
    "StorageOpt": "storage driver options are refused",
    "Annotations": "runtime annotations are refused",
}


class BodyRefused(ValueError):
    """A body the proxy will not rebuild: the one-line reason."""


def _fields(names: str, leaf: Field = Leaf.SCALAR) -> dict[str, Field]:
    return dict.fromkeys(names.split(), leaf)


MOUNT = Obj({
    **_fields("Target Source Type ReadOnly Consistency"),
    "BindOptions": Obj(_fields("Propagation NonRecursive CreateMountpoint ReadOnlyNonRecursive"
                               " ReadOnlyForceRecursive")),
    "VolumeOptions": Obj({"NoCopy": S, "Labels": MapOf(S), "Subpath": E,
                          "DriverConfig": Obj({"Name": S, "Options": E})}),
    "TmpfsOptions": Obj({"SizeBytes": S, "Mode": S, "Options": ListOf(SCALARS)}),
})
DEVICE_REQUEST = Obj({"Driver": S, "Count": S, "DeviceIDs": SCALARS,
                      "Capabilities": ListOf(SCALARS), "Options": MapOf(S)})
RESOURCES: dict[str, Field] = {
    **_fields("CpuShares Memory NanoCpus BlkioWeight CpuPeriod CpuQuota CpuRealtimePeriod"
              " CpuRealtimeRuntime CpusetCpus CpusetMems KernelMemory KernelMemoryTCP"
              " MemoryReservation MemorySwap MemorySwappiness OomKillDisable PidsLimit CpuCount"
              " CpuPercent IOMaximumIOps IOMaximumBandwidth"),
    **_fields("CgroupParent BlkioWeightDevice BlkioDeviceReadBps BlkioDeviceWriteBps"
              " BlkioDeviceReadIOps BlkioDeviceWriteIOps Devices DeviceCgroupRules", E),
    "DeviceRequests": ListOf(DEVICE_REQUEST),
    "Ulimits": ListOf(Obj(_fields("Name Soft Hard"))),
}
RESTART_POLICY = Obj(_fields("Name MaximumRetryCount"))
HOST_CONFIG = Obj({
    **RESOURCES,
    **_fields("ContainerIDFile NetworkMode AutoRemove VolumeDriver CgroupnsMode IpcMode"
              " OomScoreAdj PidMode Privileged PublishAllPorts ReadonlyRootfs UTSMode UsernsMode"
              " ShmSize Runtime Isolation Init"),
    **_fields("Links VolumesFrom Cgroup StorageOpt Sysctls Annotations", E),
    **_fields("MaskedPaths ReadonlyPaths", N),
    **_fields("Binds CapAdd CapDrop Dns DnsOptions DnsSearch ExtraHosts GroupAdd"
                    " SecurityOpt ConsoleSize", SCALARS),
    "LogConfig": Obj({"Type": S, "Config": MapOf(S)}),
    "PortBindings": MapOf(ListOf(Obj(_fields("HostIp HostPort")))),
    "RestartPolicy": RESTART_POLICY,
    "Mounts": ListOf(MOUNT),
    "Tmpfs": MapOf(S),
})
ENDPOINT = Obj({
    "IPAMConfig": Obj({"IPv4Address": S, "IPv6Address": S, "LinkLocalIPs": SCALARS}),
    **_fields("NetworkID EndpointID Gateway IPAddress IPPrefixLen IPv6Gateway GlobalIPv6Address"
              " GlobalIPv6PrefixLen MacAddress GwPriority"),
    "Aliases": SCALARS,
    "DNSNames": SCALARS,
    **_fields("Links DriverOpts", E),
})
CONTAINER_CONFIG: dict[str, Field] = {
    **_fields("Hostname Domainname User AttachStdin AttachStdout AttachStderr Tty OpenStdin"
              " StdinOnce ArgsEscaped Image WorkingDir NetworkDisabled MacAddress StopSignal"
              " StopTimeout"),
    **_fields("Env Cmd Entrypoint OnBuild Shell", SCALARS),
    "ExposedPorts": MapOf(Obj({})),
    "Volumes": MapOf(Obj({})),
    "Labels": MapOf(S),
    "Healthcheck": Obj({"Test": SCALARS,
                        **_fields("Interval Timeout StartPeriod StartInterval Retries")}),
}
CONTAINER_CREATE = Obj({
    **CONTAINER_CONFIG,
    "HostConfig": HOST_CONFIG,
    "NetworkingConfig": Obj({"EndpointsConfig": MapOf(ENDPOINT)}),
})
COMMIT = Obj(CONTAINER_CONFIG)
CONTAINER_UPDATE = Obj({**RESOURCES, "RestartPolicy": RESTART_POLICY})
EXEC_CREATE = Obj({
    # `Container` (sent by some clients) must be the slot's too (ownership.py).
    **_fields("AttachStdin AttachStdout AttachStderr DetachKeys Tty Privileged User"
              " WorkingDir Container Detach"),
    **_fields("Env Cmd ConsoleSize", SCALARS),
})
EXEC_START = Obj({"Detach": S, "Tty": S, "ConsoleSize": SCALARS})
VOLUME_CREATE = Obj({"Name": S, "Driver": S, "Labels": MapOf(S), "DriverOpts": E})
NETWORK_CREATE = Obj({
    **_fields("Name CheckDuplicate Driver Scope Internal Attachable EnableIPv6 EnableIPv4"),
    **_fields("Ingress ConfigOnly Options", E),
    "ConfigFrom": E,
    "IPAM": Obj({"Driver": S, "Options": E,
                 "Config": ListOf(Obj({**_fields("Subnet IPRange Gateway"),
                                       "AuxiliaryAddresses": MapOf(S)}))}),
    "Labels": MapOf(S),
})
NETWORK_CONNECT = Obj({"Container": S, "EndpointConfig": ENDPOINT})
NETWORK_DISCONNECT = Obj(_fields("Container Force"))
AUTH = Obj(_fields("username password auth email serveraddress identitytoken registrytoken"))


def decode(raw: bytes) -> Any:
    """JSON as only one reading allows: no repeated key, no NaN, valid UTF-8."""
    try:
        return json.loads(raw.decode("utf-8") or "{}", object_pairs_hook=_unique,
                          parse_constant=_no_constant)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BodyRefused(f"malformed JSON body: {error}") from None


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise BodyRefused(f"repeated key {key!r} is refused")
        found[key] = value
    return found


def _no_constant(name: str) -> Any:
    raise BodyRefused(f"{name} is not JSON")


def rebuilt(document: Any, schema: Obj) -> dict[str, Any]:
    """The body rebuilt from `schema`: only known keys, each spelled as the API spells it."""
    if not isinstance(document, dict):
        raise BodyRefused("the JSON body must be an object")
    result = _value(document, schema, "")
    assert isinstance(result, dict)
    return result


def _value(value: Any, field: Field, where: str) -> Any:
    if isinstance(field, Leaf):
        return _leaf(value, field, where)
    if value is None:
        return None
    if isinstance(field, ListOf):
        if not isinstance(value, list):
            raise BodyRefused(f"{where} must be a list")
        return [_value(item, field.item, where) for item in value]
    if not isinstance(value, dict):
        raise BodyRefused(f"{where} must be an object")
    if isinstance(field, MapOf):
        return {key: _value(item, field.value, f"{where}[{key!r}]")
                for key, item in value.items()}
    return _object(value, field, where)


def _object(value: dict[str, Any], schema: Obj, where: str) -> dict[str, Any]:
    folded = {name.casefold(): name for name in schema.fields}
    result = {}
    for key, item in value.items():
        path = f"{where}.{key}" if where else key
        if key not in schema.fields:
            if (spelled := folded.get(key.casefold())) is not None:
                raise BodyRefused(f"key {path!r} is refused: the API spells it {spelled!r}")
            raise BodyRefused(f"unknown key {path!r} is refused")
        field = schema.fields[key]
        if field is Leaf.EMPTY and _empty(item):
            continue
        result[key] = _value(item, field, path)
    return result


def _leaf(value: Any, leaf: Leaf, where: str) -> Any:
    if leaf is Leaf.NULL and value is not None:
        raise BodyRefused(f"{where} is refused: Docker's defaults for /proc and /sys stand")
    if leaf is Leaf.EMPTY:
        why = EMPTY_REASONS.get(where.rpartition(".")[2], "")
        raise BodyRefused(f"{where} is refused" + (f": {why}" if why else ""))
    if isinstance(value, dict | list):
        raise BodyRefused(f"{where} must be a string, number or boolean")
    if isinstance(value, float) and not math.isfinite(value):
        raise BodyRefused(f"{where} must be a finite number")
    return value


def _empty(value: Any) -> bool:
    return value in (None, "", 0, False) or (isinstance(value, list | dict) and not value)
