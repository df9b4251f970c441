"""Which Docker Engine API endpoints a slot's jobs may call, and how each request is rebuilt.

An allow-list: what a job needs (containers, images, volumes, networks, exec, events) passes;
builds, swarm, plugins, BuildKit sessions, `system/df` and the prunes that would reach other
slots are refused with their reason; anything else is refused as unknown. Containers and execs
are addressed by their full 64-hex ID only. docs/runner-proxy.md has the table.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from repro_gate.runner.proxy import bodies
from repro_gate.runner.proxy.bodies import Obj
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
FULL_ID = re.compile(r"^[0-9a-f]{64}$")


class Handling(Enum):
    """What the proxy does with one request's body."""

    PASS = "pass"  # no body; the request is rebuilt and sent
    JSON = "json"  # the JSON body is read whole, rebuilt from its schema and checked
    STREAM = "stream"  # an opaque data body (a tar), copied in the proxy's own framing
    REFUSE = "refuse"  # answered 403 by the proxy


class Records(Enum):
    """What a successful answer creates that the slot may address afterwards."""

    NOTHING = "nothing"
    CONTAINER = "container"
    EXEC = "exec"


@dataclass(frozen=True)
class Decision:
    """The handling of a request, with its body schema and check, or the refusal's reason."""

    handling: Handling
    schema: Obj | None = None
    check: BodyCheck | None = None
    reason: str = ""
    scoped: bool = False  # a listing or the event stream: narrowed to the slot's containers
    labels: bool = False  # a create: the new container, volume or network gets the slot's label
    hijack: bool = False  # attach, exec start: a 101 answer turns into a raw stream
    records: Records = Records.NOTHING
    query: tuple[str, ...] | None = None  # the query parameters allowed (None: any)
    narrowed: bool = False  # a network inspect: other containers left out of the answer


@dataclass(frozen=True)
class Routed:
    """A request's decision, what it names, and its target as the proxy writes it."""

    decision: Decision
    container: str | None = None
    exec_id: str | None = None
    target: str = ""
    names: tuple[str, ...] = ()  # a container name the request gives (create, rename)


PASS = Decision(Handling.PASS)
SCOPED = Decision(Handling.PASS, scoped=True)
ID = r"[^/]+"
CONTAINER = r"(?P<container>[^/]+)"
EXEC = r"(?P<exec>[^/]+)"
NAME = r".+"  # image names keep their slashes in the path
NAME_QUERY = ("name", "platform")

# (methods, path pattern, decision); the first match wins.
ROUTES: tuple[tuple[frozenset[str], re.Pattern[str], Decision], ...] = tuple(
    (frozenset(methods.split()), re.compile(f"^{pattern}$"), decision)
    for methods, pattern, decision in (
        ("GET HEAD", r"/_ping", PASS),
        ("GET", r"/(version|info)", PASS),
        ("GET", r"/system/df", Decision(
            Handling.REFUSE, reason="system/df is refused: it lists every slot's containers")),
        ("GET", r"/events", SCOPED),
        ("POST", r"/auth", Decision(Handling.JSON, bodies.AUTH)),
        ("POST", r"/(containers|volumes|networks|images|build)/prune", Decision(
            Handling.REFUSE, reason="prune is refused: it would remove other slots' resources")),
        ("GET", r"/containers/json", SCOPED),
        ("POST", r"/containers/create", Decision(
            Handling.JSON, bodies.CONTAINER_CREATE, check_create, labels=True,
            records=Records.CONTAINER, query=NAME_QUERY)),
        ("POST", rf"/containers/{CONTAINER}/update",
         Decision(Handling.JSON, bodies.CONTAINER_UPDATE, check_update)),
        ("POST", rf"/containers/{CONTAINER}/exec",
         Decision(Handling.JSON, bodies.EXEC_CREATE, check_exec, records=Records.EXEC)),
        ("GET", rf"/containers/{CONTAINER}/(json|top|logs|changes|export|stats)", PASS),
        ("GET HEAD", rf"/containers/{CONTAINER}/archive", PASS),
        ("PUT", rf"/containers/{CONTAINER}/archive", Decision(Handling.STREAM)),
        ("POST", rf"/containers/{CONTAINER}/attach", Decision(Handling.PASS, hijack=True)),
        ("POST", rf"/containers/{CONTAINER}/rename", Decision(Handling.PASS, query=("name",))),
        ("POST", rf"/containers/{CONTAINER}/"
                 r"(start|stop|restart|kill|pause|unpause|wait|resize)", PASS),
        ("DELETE", rf"/containers/{CONTAINER}", PASS),
        ("POST", rf"/exec/{EXEC}/start",
         Decision(Handling.JSON, bodies.EXEC_START, hijack=True)),
        ("POST", rf"/exec/{EXEC}/resize", PASS),
        ("GET", rf"/exec/{EXEC}/json", PASS),
        ("GET", r"/images/(json|search|get)", PASS),
        ("GET", rf"/images/{NAME}/(json|history|get)", PASS),
        ("POST", r"/images/create", Decision(
            Handling.PASS, query=("fromImage", "tag", "platform"))),
        ("POST", r"/images/load", Decision(Handling.STREAM, query=("quiet", "platform"))),
        ("POST", rf"/images/{NAME}/(tag|push)", PASS),
        ("DELETE", rf"/images/{NAME}", PASS),
        ("GET", rf"/distribution/{NAME}/json", PASS),
        ("POST", r"/commit", Decision(Handling.JSON, bodies.COMMIT)),
        ("GET", r"/volumes", PASS),
        ("GET", rf"/volumes/{ID}", PASS),
        ("POST", r"/volumes/create",
         Decision(Handling.JSON, bodies.VOLUME_CREATE, check_volume_create, labels=True)),
        ("DELETE", rf"/volumes/{ID}", PASS),
        ("GET", r"/networks", Decision(Handling.PASS, narrowed=True)),
        ("GET", rf"/networks/{ID}", Decision(Handling.PASS, narrowed=True)),
        ("POST", r"/networks/create",
         Decision(Handling.JSON, bodies.NETWORK_CREATE, check_network_create, labels=True)),
        ("POST", rf"/networks/{ID}/connect",
         Decision(Handling.JSON, bodies.NETWORK_CONNECT, check_connect)),
        ("POST", rf"/networks/{ID}/disconnect",
         Decision(Handling.JSON, bodies.NETWORK_DISCONNECT, check_connect)),
        ("DELETE", rf"/networks/{ID}", PASS),
        ("GET HEAD POST", r"/(build|build/.*)", Decision(
            Handling.REFUSE, reason="builds are refused: a build runs steps with settings of"
                                    " its own (network, cgroup parent); build elsewhere and"
                                    " load or pull the image")),
        ("GET POST DELETE", r"/(swarm|services|nodes|tasks|secrets|configs)(/.*)?", Decision(
            Handling.REFUSE, reason="swarm mode is refused: a runner slot has no swarm")),
        ("GET POST DELETE", r"/plugins(/.*)?", Decision(
            Handling.REFUSE, reason="plugins are refused: they run with the host's privileges")),
        ("POST", r"/(session|grpc)", Decision(
            Handling.REFUSE, reason="BuildKit sessions are refused: their entitlements"
                                    " (network host, insecure) travel where the proxy cannot"
                                    " see")),
    )
)


def route(method: str, target: str) -> Routed:
    """The decision for `method target` (the request line's target, query included)."""
    parts = urlsplit(target)
    try:
        path = unquote(parts.path, errors="strict")
    except UnicodeDecodeError:
        return _refuse("the path must be printable ASCII")
    if not path.isascii() or not path.isprintable():
        return _refuse("the path must be printable ASCII")
    if found := VERSION_PREFIX.match(path):
        version = (int(found.group(1)), int(found.group(2)))
        if version < MIN_API_VERSION:
            shown = ".".join(map(str, MIN_API_VERSION))
            return _refuse(f"API versions below {shown} are refused")
        path = found.group(3)
    if any(segment in ("", ".", "..") for segment in path.split("/")[1:]):
        # The daemon's router would clean the path into another endpoint than the one checked.
        return _refuse(f"path {path!r} is not in its clean form")
    query = parse_qsl(parts.query, keep_blank_values=True)
    for methods, pattern, decision in ROUTES:
        if method in methods and (found := pattern.match(path)):
            return _routed(decision, found.groupdict(), parts.path, query, path)
    return _refuse(f"{method} {path} is not in the proxy's allow-list")


def _routed(decision: Decision, names: dict[str, str], raw_path: str,
            query: list[tuple[str, str]], path: str) -> Routed:
    if decision.handling is Handling.REFUSE:
        return Routed(decision)
    if decision.query is not None:
        for name, _ in query:
            if name not in decision.query:
                allowed = ", ".join(decision.query)
                return _refuse(f"query parameter {name!r} of {path} is refused"
                               f" (allowed: {allowed})")
    container: str | None = names.get("container")
    if path == "/commit":  # the container to commit is in the query
        container = next((value for name, value in query if name == "container"), "")
    for name, value in query:
        if name == "name" and (reason := _name_refused(value)):
            return _refuse(reason)
    for what, given in (("containers", container), ("execs", names.get("exec"))):
        if given is not None and not FULL_ID.match(given):
            return _refuse(f"{what} are addressed by their full 64-hex ID here, not"
                           f" {given[:70]!r}: use the ID the create answered")
    # The proxy writes the target again: the decoded path re-encoded, the query re-encoded.
    target = quote(unquote(raw_path), safe="/:@")
    if query:
        target += "?" + urlencode(query)
    naming = tuple(value for name, value in query if name == "name")
    return Routed(decision, container, names.get("exec"), target, naming)


def _name_refused(name: str) -> str | None:
    """A container name a job may not take: one that reads as an ID (or an ID's prefix)."""
    if re.fullmatch(r"/?[0-9a-f]{12,64}", name):
        return f"container name {name!r} is refused: it reads as a container ID"
    return None


def _refuse(reason: str) -> Routed:
    return Routed(Decision(Handling.REFUSE, reason=reason))
