"""The per-slot Docker API proxy: a Unix socket in front of the daemon's, enforcing the slot.

Each runner container gets its slot's proxy socket as /var/run/docker.sock. Every request is
parsed strictly (framing.py), routed (routes.py), its JSON body rebuilt from an allow-list
(bodies.py) and checked (policy.py), and its containers must be the slot's (ownership.py).
Then the proxy opens one connection to the daemon for that request alone and writes the request
itself: its own head, its own body. Only a data stream (an image tar) is copied, in the
proxy's own framing. The answer is copied back; after a 101 answer to a validated attach or
exec start (or its unframed hijack), the connection becomes a raw relay both ways.
docs/runner-proxy.md lists what passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from repro_gate.runner.proxy.bodies import BodyRefused, decode, rebuilt
from repro_gate.runner.proxy.framing import (
    MAX_HEAD_BYTES,
    NO_BODY_STATUSES,
    Head,
    Refused,
    Request,
    bad,
    copy_response_body,
    copy_stream_body,
    read_body,
    read_request,
    read_response_body,
    read_response_head,
    refusal,
    request_head,
)
from repro_gate.runner.proxy.own_requests import create_volume, inspect_container
from repro_gate.runner.proxy.ownership import (
    Owned,
    implicit_volumes,
    is_owned,
    labelled,
    narrowed_network,
    referenced_containers,
    scoped,
    slot_labels,
    with_gpu_groups,
    with_slot_socket,
)
from repro_gate.runner.proxy.pins import PinRefused, Pins, pinned
from repro_gate.runner.proxy.policy import SlotPolicy, check_name
from repro_gate.runner.proxy.relay import close, connect, relay
from repro_gate.runner.proxy.routes import FULL_ID, Decision, Handling, Records, Routed, route

LOG = logging.getLogger(__name__)
MAX_BODY_BYTES = 4 * 1024 * 1024  # a create body is a few KiB; more is not a container config
# Reachable by the runner container's user; keep the socket in a directory only the service
# can enter, so no other user of the host reaches it (the bind mount skips that directory).
SOCKET_MODE = 0o666
REGISTRY_AUTH = re.compile(r"^[A-Za-z0-9+/=_-]{0,16384}$")


class Connection:
    """One client connection: its requests in turn, each checked, each on its own upstream
    connection, which the proxy writes."""

    def __init__(
        self,
        policy: SlotPolicy,
        upstream_path: Path,
        owned: Owned,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pins: Pins | None = None,
    ) -> None:
        self.policy = policy
        self.upstream_path = upstream_path
        self.owned = owned
        self.pins = pins
        self.reader = reader
        self.writer = writer

    async def run(self) -> None:
        """Serve requests until either side closes; always close both."""
        try:
            prefix: bytes | None = b""
            while prefix is not None:
                try:
                    prefix = await self._one(prefix)
                except Refused as refused:
                    LOG.warning("refused: %s", refused.message)
                    self.writer.write(refusal(refused.status, refused.message))
                    await self.writer.drain()
                    prefix = None if refused.close else b""
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # a side went away mid-exchange: nothing to answer
        finally:
            await close(self.writer)

    async def _one(self, prefix: bytes) -> bytes | None:
        """One exchange; the bytes of the next request already read, or None to close."""
        request = await read_request(self.reader, prefix)
        if request is None:
            return None
        routed = route(request.method, request.target)
        decision = routed.decision
        if decision.handling is Handling.REFUSE:
            # Its body is read and dropped, so the connection carries on; too large ends it.
            await read_body(self.reader, request, MAX_BODY_BYTES)
            raise Refused(403, decision.reason)
        for name in routed.names:
            if reason := check_name(name, self.policy):
                await read_body(self.reader, request, MAX_BODY_BYTES)
                raise Refused(403, reason)
        if decision.handling is Handling.PASS and request.has_body:
            raise bad(f"{request.method} {routed.target.split('?')[0]} takes no body")
        document: dict[str, Any] = {}
        body: bytes | None = None
        if decision.handling is Handling.JSON:
            document, body = await self._rebuilt_body(request, decision)
        await self._authorise(routed, document, request)
        if decision.records is Records.CONTAINER:
            for volume in implicit_volumes(document):
                await create_volume(self.upstream_path, volume, slot_labels(self.policy))
        head = self._head(request, routed, body)
        upstream_reader, upstream_writer = await connect(self.upstream_path)
        try:
            upstream_writer.write(head + (body or b""))
            if decision.handling is Handling.STREAM:
                await copy_stream_body(self.reader, upstream_writer, request)
            await upstream_writer.drain()
            return await self._answer(request, routed, upstream_reader, upstream_writer)
        finally:
            await close(upstream_writer)

    async def _rebuilt_body(
        self, request: Request, decision: Decision
    ) -> tuple[dict[str, Any], bytes | None]:
        """The body as the proxy will send it, or a 403 (the body is read, the connection
        carries on)."""
        raw = await read_body(self.reader, request, MAX_BODY_BYTES)
        if not raw and not decision.labels:
            return {}, None
        assert decision.schema is not None
        try:
            document = rebuilt(decode(raw), decision.schema)
        except BodyRefused as refused:
            status = 400 if str(refused).startswith("malformed JSON") else 403
            raise Refused(status, str(refused)) from None
        if decision.check is not None and (reason := decision.check(document, self.policy)):
            raise Refused(403, reason)
        if decision.labels:
            document = labelled(document, self.policy)
        if decision.records is Records.CONTAINER:
            document = with_gpu_groups(with_slot_socket(document, self.policy), self.policy)
            if self.pins is not None:
                document = self._pinned(document, self.pins)
        return document, json.dumps(document).encode()

    @staticmethod
    def _pinned(document: dict[str, Any], pins: Pins) -> dict[str, Any]:
        """Each bind source bound, as checked, onto a path no job can change (pins.py)."""
        try:
            return pinned(document, pins.pin)
        except PinRefused as refused:
            raise Refused(403, str(refused)) from None

    def _head(self, request: Request, routed: Routed, body: bytes | None) -> bytes:
        """The request head the proxy writes: nothing of the client's head but what it allows."""
        decision = routed.decision
        target = routed.target
        if decision.scoped:
            try:
                target = scoped(target, self.policy)
            except (ValueError, AttributeError, TypeError):
                raise Refused(400, "malformed filters in the query") from None
        headers: list[tuple[str, str]] = []
        if body is not None:
            headers += [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
        elif decision.handling is Handling.STREAM:
            headers.append(("Content-Type", "application/x-tar"))
            headers.append(("Transfer-Encoding", "chunked") if request.chunked
                           else ("Content-Length", str(request.length)))
        auth = request.head.header("X-Registry-Auth")
        if auth is not None:
            if not REGISTRY_AUTH.match(auth):
                raise bad("malformed X-Registry-Auth header")
            headers.append(("X-Registry-Auth", auth))
        if decision.hijack and (request.head.header("Upgrade") or "").lower() == "tcp":
            headers += [("Connection", "Upgrade"), ("Upgrade", "tcp")]
        return request_head(request.method, target, headers)

    async def _authorise(self, routed: Routed, document: dict[str, Any],
                         request: Request) -> None:
        """Refuse a request naming a container (or an exec) that is not the slot's."""
        if routed.exec_id is not None and routed.exec_id not in self.owned.execs:
            raise self._unread(routed, request, Refused(
                403, f"exec {routed.exec_id!r} is not one of this slot's"))
        names = [routed.container] if routed.container else []
        for name in [*names, *referenced_containers(document)]:
            if name in self.owned.containers:
                continue
            if not FULL_ID.match(name):
                raise Refused(403, f"containers are addressed by their full 64-hex ID here,"
                                   f" not {name[:70]!r}: use the ID the create answered")
            container = await inspect_container(self.upstream_path, name)
            if container is None:
                raise self._unread(routed, request, Refused(404, f"no such container: {name}"))
            if not is_owned(container, name, self.policy):
                raise self._unread(routed, request, Refused(
                    403, f"container {name!r} is not one of this slot's"))
            self.owned.containers.add(name)

    @staticmethod
    def _unread(routed: Routed, request: Request, refused: Refused) -> Refused:
        """A refusal before a streamed body was read: the connection must end."""
        if request.has_body and routed.decision.handling is Handling.STREAM:
            return Refused(refused.status, refused.message, close=True)
        return refused

    async def _answer(self, request: Request, routed: Routed, upstream: asyncio.StreamReader,
                      upstream_writer: asyncio.StreamWriter) -> bytes | None:
        """Copy the daemon's answer; the next request's first bytes, or None to close."""
        decision = routed.decision
        watch = asyncio.ensure_future(self.reader.read(1))
        try:
            finished, response = await _while_watching(read_response_head(upstream), watch,
                                                       eof_ends=False)
            if not finished or _sent(watch):
                raise bad("pipelined requests are refused: wait for each answer")
            client_closed = watch.done()  # its side only: it still gets the answer
            status = response.status
            if decision.hijack and (status == 101 or _unframed(request, response)):
                self.writer.write(response.encode())
                await self.writer.drain()
                early = await _stop(watch)  # sent after the 101: the stream's first bytes
                await relay(upstream, upstream_writer, self.reader, self.writer, early or b"")
                return None
            if 100 <= status < 200:
                raise ConnectionError(f"the daemon answered {status}")
            if _bodiless(request, response):
                self.writer.write(response.encode())
            elif (decision.records is not Records.NOTHING or decision.narrowed) and (
                    status in (200, 201)):
                body = await read_response_body(upstream, response, MAX_BODY_BYTES)
                body = self._recorded(decision, body)
                self.writer.write(_with_length(response, len(body)) + body)
            else:
                self.writer.write(response.encode())
                copy = copy_response_body(upstream, self.writer, response)
                if client_closed:
                    await copy
                    return None
                finished, _ = await _while_watching(copy, watch)
                if not finished or _unframed(request, response):
                    return None  # the client sent early or left; or the body ran to the end
            await self.writer.drain()
            following = await _stop(watch)  # sent once the whole answer was written
            if following is not None:
                return following or None
            return None if request.head.closes else b""
        finally:
            await _stop(watch)

    def _recorded(self, decision: Decision, body: bytes) -> bytes:
        """Note what the answer created; narrow a network inspect to the slot's containers."""
        if decision.narrowed:
            return narrowed_network(body, self.owned)
        with contextlib.suppress(UnicodeDecodeError, json.JSONDecodeError, AttributeError,
                                 TypeError):
            created = str(json.loads(body).get("Id") or "")
            if FULL_ID.match(created):
                chosen = (self.owned.containers if decision.records is Records.CONTAINER
                          else self.owned.execs)
                chosen.add(created)
        return body


async def _while_watching(work: Any, watch: asyncio.Future[bytes],
                          eof_ends: bool = True) -> tuple[bool, Any]:
    """Run `work` unless the client sends first, or leaves (with `eof_ends`; otherwise a
    client that closed its side still gets the answer): (whether it finished, its result)."""
    task = asyncio.ensure_future(work)
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done() and not eof_ends and not _sent(watch):
            await asyncio.wait({task})
        if not task.done():
            return False, None
        return True, await task
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def _sent(watch: asyncio.Future[bytes]) -> bool:
    """Whether the client sent a byte (not merely closed its side)."""
    return (watch.done() and not watch.cancelled() and watch.exception() is None
            and bool(watch.result()))


async def _stop(watch: asyncio.Future[bytes]) -> bytes | None:
    """Stop watching the client; what it sent meanwhile, if anything."""
    if not watch.done():
        watch.cancel()
        await asyncio.gather(watch, return_exceptions=True)
    if watch.cancelled() or watch.exception() is not None:
        return None
    return watch.result()


def _bodiless(request: Request, response: Head) -> bool:
    return request.method == "HEAD" or response.status in NO_BODY_STATUSES


def _unframed(request: Request, response: Head) -> bool:
    """A body that lasts until the connection closes (a hijacked stream answered 200)."""
    return (not _bodiless(request, response) and not response.chunked
            and response.header("Content-Length") is None)


def _with_length(response: Head, length: int) -> bytes:
    framing = ("content-length", "transfer-encoding")
    headers = [(k, v) for k, v in response.headers if k.lower() not in framing]
    return replace(response, headers=(*headers, ("Content-Length", str(length)))).encode()


async def serve(policy: SlotPolicy, listen_path: Path, upstream_path: Path,
                pins: Pins | None = None) -> None:
    """Listen on `listen_path` for one slot until cancelled; then close every connection.
    With `pins` (a slot's own engine), bind sources are pinned (pins.py)."""
    # The proxy's own socket and the daemon's are never bound into a container by their paths;
    # the runner's socket path (RUNNER_SOCKETS) is rewritten to this proxy's.
    policy = replace(policy, protected=policy.protected | {listen_path, upstream_path},
                     proxy_socket=Path(os.path.abspath(listen_path)))  # the daemon's view
    listen_path.unlink(missing_ok=True)
    connections: set[asyncio.Task[None]] = set()
    owned = Owned()  # what this slot's requests created, shared by its connections

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        connections.add(task)
        try:
            await Connection(policy, upstream_path, owned, reader, writer, pins).run()
        except asyncio.CancelledError:
            pass  # the proxy is shutting down; asyncio would log a cancelled handler as an error
        finally:
            connections.discard(task)

    # The socket file appears when it is bound, before it listens: a client that connects in
    # between is refused. So it listens under a temporary name first and is then renamed:
    # whoever sees `listen_path` can connect.
    binding = listen_path.with_name(listen_path.name + ".binding")
    binding.unlink(missing_ok=True)
    server = await asyncio.start_unix_server(accept, path=str(binding), limit=MAX_HEAD_BYTES)
    os.chmod(binding, SOCKET_MODE)
    os.replace(binding, listen_path)
    LOG.info("docker proxy for GPU %s on %s", policy.gpu_uuid, listen_path)
    try:
        await server.serve_forever()
    finally:
        server.close()
        for task in list(connections):
            task.cancel()
        await asyncio.gather(*connections, return_exceptions=True)
        with contextlib.suppress(asyncio.CancelledError):
            await server.wait_closed()
        listen_path.unlink(missing_ok=True)
