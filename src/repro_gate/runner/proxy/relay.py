"""The proxy's connections to the daemon, and the raw relay of bytes after a validated
attach or exec got its 101 (or hijack) answer: never parsed, a half-close passed on."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from repro_gate.runner.proxy.framing import CHUNK_BYTES, MAX_HEAD_BYTES, Refused


async def relay(upstream: asyncio.StreamReader, upstream_writer: asyncio.StreamWriter,
                 reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 early: bytes) -> None:
    """Bytes both ways until the daemon ends (attach, exec): a half-close is passed on."""
    if early:
        upstream_writer.write(early)
    down = asyncio.ensure_future(pump(upstream, writer))
    up = asyncio.ensure_future(pump(reader, upstream_writer))
    try:
        done, _ = await asyncio.wait({down, up}, return_when=asyncio.FIRST_COMPLETED)
        if up in done and up.exception() is None:
            await down  # the client closed its input (stdin EOF): output still comes
    finally:
        for task in (down, up):
            task.cancel()
        await asyncio.gather(down, up, return_exceptions=True)


async def connect(path: Path) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    try:
        return await asyncio.open_unix_connection(str(path), limit=MAX_HEAD_BYTES)
    except OSError as error:  # the daemon is down or restarting: say so, as a daemon would
        message = f"cannot reach the Docker daemon at {path}: {error.strerror or error}"
        raise Refused(502, message, close=True) from None


async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(CHUNK_BYTES):
        writer.write(data)
        await writer.drain()
    if writer.can_write_eof():
        writer.write_eof()


async def close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(OSError, asyncio.CancelledError):
        await writer.wait_closed()
