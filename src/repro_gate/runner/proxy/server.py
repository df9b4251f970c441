"""The per-slot Docker API proxy: a Unix socket in front of the daemon's, enforcing the slot.

Each runner container gets its slot's proxy socket as /var/run/docker.sock. The proxy speaks
just enough HTTP/1.1 to see each request of a keep-alive connection: the request line decides
(routes.py), create-like bodies are read whole and checked (policy.py), everything else
is streamed both ways as it comes (chunked logs, wait, events). A 101 answer (attach and exec
with `Upgrade: tcp`), or a response without framing, switches the connection to a raw relay of
bytes in both directions that is never parsed. docs/runner-proxy.md lists what passes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

from repro_gate.runner.proxy.framing import (
    CHUNK_BYTES,
    NO_BODY_STATUSES,
    Head,
    Refused,
    copy_body,
    read_body,
    read_head,
    refusal,
)
from repro_gate.runner.proxy.ownership import (
    is_owned,
    labelled,
    referenced_containers,
    scoped,
    with_slot_socket,
)
from repro_gate.runner.proxy.policy import SlotPolicy
from repro_gate.runner.proxy.routes import Decision, Handling, Routed, route

LOG = logging.getLogger(__name__)
MAX_BODY_BYTES = 4 * 1024 * 1024  # a create body is a few KiB; more is not a container config
MAX_HEAD_BYTES = 64 * 1024
# Reachable by the runner container's user; keep the socket in a directory only the service
# can enter, so no other user of the host reaches it (the bind mount skips that directory).
SOCKET_MODE = 0o666


class Connection:
    """One client connection: its requests in turn, each checked, over one upstream connection."""

    def __init__(
        self,
        policy: SlotPolicy,
        upstream_path: Path,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        self.policy = policy
        self.upstream_path = upstream_path
        self.reader = reader
        self.writer = writer
        self.upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

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
            await self._close()

    async def _one(self, prefix: bytes) -> bytes | None:
        """One exchange; the bytes of the next request already read, or None to close."""
        head = await read_head(self.reader, prefix)
        if head is None:
            return None
        method, target = _request_line(head)
        routed = route(method, target)
        body, document = None, None
        if routed.decision.handling is not Handling.PASS:
            body, document = await self._checked_body(head, routed.decision)
        try:
            await self._authorise(routed, document or {})
        except Refused as refused:
            # A streamed body not yet read would be taken for the next request: hang up.
            unread = body is None and (head.chunked or bool(head.length))
            raise Refused(refused.status, refused.message, close=unread) from None
        if routed.decision.labels and document is not None:
            create = with_slot_socket(labelled(document, self.policy), self.policy)
            body = json.dumps(create).encode()
        if routed.decision.scoped:
            try:
                head = replace(head, start=f"{method} {scoped(target, self.policy)} HTTP/1.1")
            except (ValueError, AttributeError, TypeError):
                raise Refused(400, "malformed filters in the query") from None
        upstream_reader, upstream_writer = await self._upstream()
        if body is None:
            upstream_writer.write(head.encode())
            await copy_body(self.reader, upstream_writer, head)
        else:
            upstream_writer.write(head.encode(len(body)) + body)
        await upstream_writer.drain()
        response = await read_head(upstream_reader)
        if response is None:
            raise ConnectionError("the daemon closed the connection")
        self.writer.write(response.encode())
        return await self._respond(method, head, response)

    async def _checked_body(self, head: Head, decision: Decision) -> tuple[bytes, dict[str, Any]]:
        if decision.handling is Handling.REFUSE:
            # Its body (a plugin's, a service's) is read and dropped, so that the client is
            # not cut off mid-send and the connection carries on; one too large ends it.
            await read_body(self.reader, head, MAX_BODY_BYTES)
            raise Refused(403, decision.reason)
        body = await read_body(self.reader, head, MAX_BODY_BYTES)
        try:
            document = json.loads(body or b"{}")
        except (UnicodeDecodeError, json.JSONDecodeError) as error:
            raise Refused(400, f"malformed JSON body: {error}") from None
        if not isinstance(document, dict):
            raise Refused(400, "the JSON body must be an object")
        assert decision.check is not None
        if reason := decision.check(document, self.policy):
            raise Refused(403, reason)
        return body, document

    async def _authorise(self, routed: Routed, document: dict[str, Any]) -> None:
        """Refuse a request naming a container (or an exec) that is not the slot's."""
        names = [routed.container] if routed.container else []
        if routed.exec_id:
            found = await self._inspect(f"/exec/{quote(routed.exec_id, safe='')}/json")
            names += [str(found["ContainerID"])] if found else []
        for name in [*names, *referenced_containers(document)]:
            container = await self._inspect(f"/containers/{quote(name, safe='')}/json")
            # An unknown name passes: the daemon answers its own 404.
            if container is not None and not is_owned(container, self.policy):
                raise Refused(403, f"container {name!r} is not one of this slot's")

    async def _inspect(self, path: str) -> dict[str, Any] | None:
        """The daemon's JSON for `path` on a connection of its own; None when not found."""
        reader, writer = await _connect(self.upstream_path)
        try:
            writer.write(f"GET {path} HTTP/1.1\r\nHost: docker\r\nConnection: close\r\n\r\n"
                         .encode())
            await writer.drain()
            head = await read_head(reader)
            if head is None:
                raise ConnectionError("the daemon closed the connection")
            status = int(head.start.split(" ", 2)[1])
            body = await read_body(reader, head, MAX_BODY_BYTES)
        finally:
            await _close(writer)
        if status == 404:
            return None
        if status != 200:
            raise Refused(502, f"cannot check who owns {path}: the daemon answered {status}")
        return dict(json.loads(body))

    async def _respond(self, method: str, request: Head, response: Head) -> bytes | None:
        status = int(response.start.split(" ", 2)[1])
        if status == 101 or _unframed(method, status, response):
            await self.writer.drain()
            await self._relay()
            return None
        if method == "HEAD" or status in NO_BODY_STATUSES or 100 <= status < 200:
            await self.writer.drain()
            prefix: bytes | None = b""
        else:
            prefix = await self._stream_response(response)
        if response.closes:
            await self._close_upstream()
        return None if request.closes else prefix

    async def _stream_response(self, response: Head) -> bytes | None:
        """Copy the response body while watching the client: if it leaves, stop at once."""
        upstream_reader, _ = await self._upstream()
        copy = asyncio.ensure_future(copy_body(upstream_reader, self.writer, response))
        watch = asyncio.ensure_future(self.reader.read(1))
        try:
            await asyncio.wait({copy, watch}, return_when=asyncio.FIRST_COMPLETED)
            if watch.done() and not watch.result():
                return None  # the client closed while a wait or a log stream was open
            await copy
            # A client that sent its next request early: its first byte is kept.
            return watch.result() if watch.done() else b""
        finally:
            for task in (copy, watch):
                task.cancel()
            await asyncio.gather(copy, watch, return_exceptions=True)

    async def _relay(self) -> None:
        """Bytes both ways until the daemon ends (attach, exec): a half-close is passed on."""
        upstream_reader, upstream_writer = await self._upstream()
        down = asyncio.ensure_future(_pump(upstream_reader, self.writer))
        up = asyncio.ensure_future(_pump(self.reader, upstream_writer))
        try:
            done, _ = await asyncio.wait({down, up}, return_when=asyncio.FIRST_COMPLETED)
            if up in done and up.exception() is None:
                await down  # the client closed its input (stdin EOF): output still comes
        finally:
            for task in (down, up):
                task.cancel()
            await asyncio.gather(down, up, return_exceptions=True)

    async def _upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.upstream is None:
            self.upstream = await _connect(self.upstream_path)
        return self.upstream

    async def _close_upstream(self) -> None:
        if self.upstream is not None:
            await _close(self.upstream[1])
            self.upstream = None

    async def _close(self) -> None:
        await self._close_upstream()
        await _close(self.writer)


async def _connect(path: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    try:
        return await asyncio.open_unix_connection(str(path), limit=MAX_HEAD_BYTES)
    except OSError as error:  # the daemon is down or restarting: say so, as a daemon would
        message = f"cannot reach the Docker daemon at {path}: {error.strerror or error}"
        raise Refused(502, message, close=True) from None


def _request_line(head: Head) -> tuple[str, str]:
    parts = head.start.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise Refused(400, f"malformed request line {head.start[:60]!r}", close=True)
    return parts[0], parts[1]


def _unframed(method: str, status: int, response: Head) -> bool:
    """A body that lasts until the connection closes (a hijacked stream answered 200)."""
    if method == "HEAD" or status in NO_BODY_STATUSES or status < 200:
        return False
    return not response.chunked and response.header("Content-Length") is None


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(CHUNK_BYTES):
        writer.write(data)
        await writer.drain()
    if writer.can_write_eof():
        writer.write_eof()


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(OSError, asyncio.CancelledError):
        await writer.wait_closed()


async def serve(policy: SlotPolicy, listen_path: Path, upstream_path: Path) -> None:
    """Listen on `listen_path` for one slot until cancelled; then close every connection."""
    # The proxy's own socket and the daemon's are never bound into a container by their paths;
    # the runner's socket path (RUNNER_SOCKETS) is rewritten to this proxy's.
    policy = replace(policy, protected=policy.protected | {listen_path, upstream_path},
                     proxy_socket=Path(os.path.abspath(listen_path)))  # the daemon's view
    listen_path.unlink(missing_ok=True)
    connections: set[asyncio.Task[None]] = set()

    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        connections.add(task)
        try:
            await Connection(policy, upstream_path, reader, writer).run()
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
