"""Which Docker Engine API endpoints a slot's jobs may call, and which bodies are inspected.

An allow-list: what a job needs (containers, images, volumes, networks, exec, events) passes;
swarm, plugins, BuildKit sessions and the prunes that would reach other slots are refused with
their reason; anything else is refused as unknown. docs/runner-proxy.md has the table.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from repro_gate.runner.proxy.policy import (
    SlotPolicy,
    check_connect,
    check_create,
    check_exec,
    check_network_create,
    check_update,
    check_volume_create,
)

BodyCheck = Callable[[dict[str, Any], SlotPolicy], "str | None"]
# Before API 1.24 `start` took a HostConfig body: an old client could bypass the create rules.
MIN_API_VERSION = (1, 24)
VERSION_PREFIX = re.compile(r"^/v(\d+)\.(\d+)(/.*)$")


class Handling(Enum):
    """What the proxy does with one request."""

    PASS = "pass"  # forwarded as it is, body streamed
    INSPECT = "inspect"  # the JSON body is read whole and checked first
    REFUSE = "refuse"  # answered 403 by the proxy


@dataclass(frozen=True)
class Decision:
    """The handling of a request, with the body check or the reason for a refusal."""

    handling: Handling
    check: BodyCheck | None = None
    reason: str = ""
    scoped: bool = False  # a listing or the event stream: narrowed to the slot's containers
    labels: bool = False  # a create: the new container gets the slot's label


@dataclass(frozen=True)
class Routed:
    """A request's decision and what it names: a container or an exec must be the slot's."""

    decision: Decision
    container: str | None = None
    exec_id: str | None = None


PASS = Decision(Handling.PASS)
SCOPED = Decision(Handling.PASS, scoped=True)
ID = r"[^/]+"
CONTAINER = r"(?P<container>[^/]+)"
EXEC = r"(?P<exec>[^/]+)"
NAME = r".+"  # image names keep their slashes in the path

# (methods, path pattern, decision); the first match wins.
ROUTES: tuple[tuple[frozenset[str], re.Pattern[str], Decision], ...] = tuple(
    (frozenset(methods.split()), re.compile(f"^{pattern}$"), decision)
    for methods, pattern, decision in (
        ("GET HEAD", r"/_ping", PASS),
        ("GET", r"/(version|info|system/df)", PASS),
        ("GET", r"/events", SCOPED),
        ("POST", r"/auth", PASS),
        ("POST", r"/(containers|volumes|networks)/prune", Decision(
            Handling.REFUSE, reason="prune is refused: it would remove other slots' resources")),
        ("GET", r"/containers/json", SCOPED),
        ("POST", r"/containers/create", Decision(Handling.INSPECT, check_create, labels=True)),
        ("POST", rf"/containers/{CONTAINER}/update", Decision(Handling.INSPECT, check_update)),
        ("POST", rf"/containers/{CONTAINER}/exec", Decision(Handling.INSPECT, check_exec)),
        ("GET", rf"/containers/{CONTAINER}/(json|top|logs|changes|export|stats|attach/ws)", PASS),
        ("GET HEAD PUT", rf"/containers/{CONTAINER}/archive", PASS),
        ("POST", rf"/containers/{CONTAINER}/"
                 r"(start|stop|restart|kill|rename|pause|unpause|attach|wait|resize)", PASS),
        ("DELETE", rf"/containers/{CONTAINER}", PASS),
        ("POST", rf"/exec/{EXEC}/(start|resize)", PASS),
        ("GET", rf"/exec/{EXEC}/json", PASS),
        ("GET", r"/images/(json|search|get)", PASS),
        ("GET", rf"/images/{NAME}/(json|history|get)", PASS),
        ("POST", r"/images/(create|load|prune)", PASS),
        ("POST", rf"/images/{NAME}/(tag|push)", PASS),
        ("DELETE", rf"/images/{NAME}", PASS),
        ("GET", rf"/distribution/{NAME}/json", PASS),
        ("POST", r"/(build|build/prune)", PASS),
        ("GET", rf"/volumes(/{ID})?", PASS),
        ("POST", r"/volumes/create", Decision(Handling.INSPECT, check_volume_create)),
        ("DELETE", rf"/volumes/{ID}", PASS),
        ("GET", rf"/networks(/{ID})?", PASS),
        ("POST", r"/networks/create", Decision(Handling.INSPECT, check_network_create)),
        ("POST", rf"/networks/{ID}/(connect|disconnect)",
         Decision(Handling.INSPECT, check_connect)),
        ("DELETE", rf"/networks/{ID}", PASS),
        ("GET POST DELETE", r"/(swarm|services|nodes|tasks|secrets|configs)(/.*)?", Decision(
            Handling.REFUSE, reason="swarm mode is refused: a runner slot has no swarm")),
        ("GET POST DELETE", r"/plugins(/.*)?", Decision(
            Handling.REFUSE, reason="plugins are refused: they run with the host's privileges")),
        ("POST", r"/(session|grpc)", Decision(
            Handling.REFUSE, reason="BuildKit sessions are refused: their entitlements"
                                    " (network host, insecure) travel where the proxy cannot"
                                    " see; use the classic builder (DOCKER_BUILDKIT=0)")),
    )
)


def route(method: str, target: str) -> Routed:
    """The decision for `method target` (the request line's target, query included)."""
    parts = urlsplit(target)
    path = unquote(parts.path)
    if found := VERSION_PREFIX.match(path):
        version = (int(found.group(1)), int(found.group(2)))
        if version < MIN_API_VERSION:
            shown = ".".join(map(str, MIN_API_VERSION))
            return _refuse(f"API versions below {shown} are refused")
        path = found.group(3)
    if any(segment in ("", ".", "..") for segment in path.split("/")[1:]):
        # The daemon's router would clean the path into another endpoint than the one checked.
        return _refuse(f"path {path!r} is not in its clean form")
    if method == "POST" and path == "/build" and _host_network(parts.query):
        return _refuse("a build with networkmode 'host' is refused")
    if method == "POST" and path == "/commit":  # the container to commit is in the query
        return Routed(PASS, container=_query_value(parts.query, "container"))
    for methods, pattern, decision in ROUTES:
        if method in methods and (found := pattern.match(path)):
            names = found.groupdict()
            return Routed(decision, names.get("container"), names.get("exec"))
    return _refuse(f"{method} {path} is not in the proxy's allow-list")


def _refuse(reason: str) -> Routed:
    return Routed(Decision(Handling.REFUSE, reason=reason))


def _query_value(query: str, name: str) -> str | None:
    values = parse_qs(query).get(name)
    return values[0] if values else None


def _host_network(query: str) -> bool:
    modes = parse_qs(query).get("networkmode", [])
    return any(mode.lower() == "host" for mode in modes)
