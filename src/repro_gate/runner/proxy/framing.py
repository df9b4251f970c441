"""Just enough HTTP/1.1 for the Docker proxy: heads, bodies by their framing, refusals.

Bodies are either read whole (to be checked) or copied as they come, chunk by chunk, so a log
stream or a `wait` reaches the client as the daemon sends it.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

CHUNK_BYTES = 64 * 1024
NO_BODY_STATUSES = (204, 304)


class Refused(Exception):
    """A request the proxy answers itself: status and message; `close` ends the connection."""

    def __init__(self, status: int, message: str, close: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.close = close


@dataclass(frozen=True)
class Head:
    """A request's or response's start line and headers, as received."""

    start: str
    headers: tuple[tuple[str, str], ...]

    @classmethod
    def parse(cls, raw: bytes) -> Head:
        lines = raw.decode("latin-1").split("\r\n")
        headers = []
        for line in lines[1:]:
            if line:
                name, sep, value = line.partition(":")
                if not sep:
                    raise Refused(400, f"malformed header line {line[:40]!r}", close=True)
                headers.append((name.strip(), value.strip()))
        return cls(lines[0], tuple(headers))

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        return next((value for key, value in self.headers if key.lower() == wanted), None)

    @property
    def chunked(self) -> bool:
        return "chunked" in (self.header("Transfer-Encoding") or "").lower()

    @property
    def length(self) -> int | None:
        text = self.header("Content-Length")
        try:
            return None if text is None else int(text)
        except ValueError:
            raise Refused(400, f"bad Content-Length {text!r}", close=True) from None

    @property
    def closes(self) -> bool:
        return "close" in (self.header("Connection") or "").lower()

    def encode(self, body_length: int | None = None) -> bytes:
        """The head as bytes; with `body_length`, framed as a body of exactly that length."""
        headers = list(self.headers)
        if body_length is not None:
            framing = ("content-length", "transfer-encoding")
            headers = [(k, v) for k, v in headers if k.lower() not in framing]
            headers.append(("Content-Length", str(body_length)))
        lines = [self.start, *(f"{name}: {value}" for name, value in headers), "", ""]
        return "\r\n".join(lines).encode("latin-1")


async def read_head(reader: asyncio.StreamReader, prefix: bytes = b"") -> Head | None:
    """The next head on `reader` (None at a clean end of the connection)."""
    try:
        raw = prefix + await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as error:
        if prefix or error.partial:
            raise Refused(400, "the connection ended inside a request head", close=True) from None
        return None
    except asyncio.LimitOverrunError:
        raise Refused(431, "request head too large", close=True) from None
    return Head.parse(raw[:-4])


async def read_body(reader: asyncio.StreamReader, head: Head, limit: int) -> bytes:
    """The whole body of a request, de-chunked; over `limit` bytes is refused."""
    too_large = Refused(413, f"request body over {limit // (1024 * 1024)} MiB", close=True)
    if not head.chunked:
        length = head.length or 0
        if length > limit:
            raise too_large
        return await reader.readexactly(length)
    body = bytearray()
    while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
        if len(body) + size > limit:
            raise too_large
        body += (await reader.readexactly(size + 2))[:-2]
    await _read_trailers(reader, None)
    return bytes(body)


async def copy_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: Head) -> None:
    """Copy one body as framed by `head` (chunked or Content-Length), flushing as it comes."""
    if head.chunked:
        while True:
            line = await reader.readuntil(b"\r\n")
            writer.write(line)
            size = int(line.split(b";")[0], 16)
            if size == 0:
                await _read_trailers(reader, writer)
                return
            await _copy_exactly(reader, writer, size + 2)
    else:
        await _copy_exactly(reader, writer, head.length or 0)


async def _copy_exactly(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, count: int
) -> None:
    while count > 0:
        data = await reader.read(min(count, CHUNK_BYTES))
        if not data:
            raise asyncio.IncompleteReadError(b"", count)
        count -= len(data)
        writer.write(data)
        await writer.drain()


async def _read_trailers(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter | None
) -> None:
    while True:
        line = await reader.readuntil(b"\r\n")
        if writer is not None:
            writer.write(line)
        if line == b"\r\n":
            if writer is not None:
                await writer.drain()
            return


def refusal(status: int, message: str) -> bytes:
    """A complete JSON error response, as the daemon would send it."""
    body = json.dumps({"message": f"repro-gate docker proxy: {message}"}).encode()
    reasons = {400: "Bad Request", 403: "Forbidden", 413: "Payload Too Large",
               431: "Request Header Fields Too Large", 502: "Bad Gateway"}
    head = Head(
        f"HTTP/1.1 {status} {reasons.get(status, 'Error')}",
        (("Content-Type", "application/json"), ("Content-Length", str(len(body)))),
    )
    return head.encode() + body
