"""Strict HTTP/1.1 for the Docker proxy: request heads and bodies read as nothing else could
read them, request heads and framings written by the proxy itself, responses copied as framed.

A request head is refused unless it is unambiguous: CRLF line ends only (no bare LF or CR), no
obsolete line folding, header names that are tokens, printable ASCII only, one Content-Length
or `Transfer-Encoding: chunked` (never both, never another coding, never twice), no `Expect`.
Every refusal closes the connection: the proxy never guesses where a bad request ends.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass

CHUNK_BYTES = 64 * 1024
MAX_HEAD_BYTES = 64 * 1024
MAX_HEADERS = 100
NO_BODY_STATUSES = (204, 304)
TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
# Printable ASCII, space and tab: what a header value may hold.
VALUE = re.compile(r"^[\t\x20-\x7e]*$")
TARGET = re.compile(r"^/[\x21-\x7e]*$")  # origin form: a path and a query, visible ASCII
CHUNK_SIZE = re.compile(rb"^[0-9A-Fa-f]{1,8}\r\n$")
REASONS = {400: "Bad Request", 403: "Forbidden", 404: "Not Found", 413: "Payload Too Large",
           431: "Request Header Fields Too Large", 502: "Bad Gateway"}


class Refused(Exception):
    """A request the proxy answers itself: status and message; `close` ends the connection."""

    def __init__(self, status: int, message: str, close: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.close = close


def bad(message: str) -> Refused:
    """A malformed request: 400, and the connection is closed."""
    return Refused(400, message, close=True)


@dataclass(frozen=True)
class Head:
    """A start line and headers (names as sent, values without surrounding space)."""

    start: str
    headers: tuple[tuple[str, str], ...]

    @classmethod
    def parse(cls, raw: bytes) -> Head:
        """A response head from the daemon (CRLF lines, as Go writes them)."""
        lines = raw.decode("latin-1").split("\r\n")
        headers = []
        for line in lines[1:]:
            if line:
                name, sep, value = line.partition(":")
                if not sep:
                    raise ConnectionError(f"the daemon sent a malformed header {line[:40]!r}")
                headers.append((name.strip(), value.strip()))
        return cls(lines[0], tuple(headers))

    def values(self, name: str) -> list[str]:
        wanted = name.lower()
        return [value for key, value in self.headers if key.lower() == wanted]

    def header(self, name: str) -> str | None:
        found = self.values(name)
        return found[0] if found else None

    @property
    def chunked(self) -> bool:
        return "chunked" in (self.header("Transfer-Encoding") or "").lower()

    @property
    def length(self) -> int | None:
        text = self.header("Content-Length")
        return None if text is None or not text.isdigit() else int(text)

    @property
    def closes(self) -> bool:
        return "close" in (self.header("Connection") or "").lower()

    @property
    def status(self) -> int:
        parts = self.start.split(" ", 2)
        if len(parts) < 2 or not parts[1].isdigit():
            raise ConnectionError(f"the daemon sent a malformed status line {self.start[:40]!r}")
        return int(parts[1])

    def encode(self) -> bytes:
        lines = [self.start, *(f"{name}: {value}" for name, value in self.headers), "", ""]
        return "\r\n".join(lines).encode("latin-1")


@dataclass(frozen=True)
class Request:
    """A validated request head: its parts, and how its body is framed."""

    method: str
    target: str
    head: Head
    length: int  # the Content-Length, 0 when absent or chunked
    chunked: bool

    @property
    def has_body(self) -> bool:
        return self.chunked or self.length > 0


def parse_request(raw: bytes) -> Request:
    """A request head (without its final CRLF CRLF), or the reason it is refused."""
    if any(byte > 0x7E for byte in raw):
        raise bad("non-ASCII bytes in the request head are refused")
    text = raw.decode("ascii")
    if "\n" in text.replace("\r\n", "") or "\r" in text.replace("\r\n", ""):
        raise bad("a bare LF or CR in the request head is refused (CRLF only)")
    request_line, *lines = text.split("\r\n")
    method, target = _request_line(request_line)
    if len(lines) > MAX_HEADERS:
        raise bad(f"more than {MAX_HEADERS} header lines")
    headers = tuple(_header(line) for line in lines)
    head = Head(request_line, headers)
    if head.values("Expect"):
        raise bad("Expect is refused: send the body with the request")
    lengths, codings = head.values("Content-Length"), head.values("Transfer-Encoding")
    if lengths and codings:
        raise bad("both Content-Length and Transfer-Encoding are refused")
    if len(lengths) > 1 or len(codings) > 1:
        raise bad("a repeated Content-Length or Transfer-Encoding is refused")
    if codings and codings[0].lower() != "chunked":
        raise bad(f"Transfer-Encoding {codings[0][:40]!r} is refused (only 'chunked')")
    if lengths and not (lengths[0].isdigit() and len(lengths[0]) <= 15):
        raise bad(f"Content-Length {lengths[0][:40]!r} is refused")
    length = int(lengths[0]) if lengths else 0
    return Request(method, target, head, length, chunked=bool(codings))


def _request_line(line: str) -> tuple[str, str]:
    parts = line.split(" ")
    if len(parts) != 3 or parts[2] != "HTTP/1.1" or not TOKEN.match(parts[0]):
        raise bad(f"malformed request line {line[:60]!r} (HTTP/1.1 only)")
    target = parts[1]
    if not TARGET.match(target) or target.startswith("//") or "#" in target:
        raise bad(f"malformed request target {target[:60]!r}")
    return parts[0], target


def _header(line: str) -> tuple[str, str]:
    if line[:1] in (" ", "\t"):
        raise bad("obsolete line folding is refused")
    name, sep, value = line.partition(":")
    if not sep or not TOKEN.match(name):
        raise bad(f"malformed header line {line[:40]!r}")
    if not VALUE.match(value):
        raise bad(f"a control character in header {name!r} is refused")
    return name, value.strip(" \t")


async def read_request(reader: asyncio.StreamReader, prefix: bytes = b"") -> Request | None:
    """The next request head on `reader` (None at a clean end of the connection)."""
    try:
        raw = prefix + await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as error:
        if prefix or error.partial:
            raise bad("the connection ended inside a request head") from None
        return None
    except asyncio.LimitOverrunError:
        raise Refused(431, "request head too large", close=True) from None
    if len(raw) > MAX_HEAD_BYTES:
        raise Refused(431, "request head too large", close=True)
    return parse_request(raw[:-4])


async def read_response_head(reader: asyncio.StreamReader) -> Head:
    """The daemon's response head."""
    try:
        raw = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        raise ConnectionError("the daemon closed the connection") from None
    return Head.parse(raw[:-4])


async def read_body(reader: asyncio.StreamReader, request: Request, limit: int) -> bytes:
    """The whole body of a request, de-chunked; over `limit` bytes is refused."""
    too_large = Refused(413, f"request body over {limit // (1024 * 1024)} MiB", close=True)
    if not request.chunked:
        if request.length > limit:
            raise too_large
        return await reader.readexactly(request.length)
    body = bytearray()
    async for chunk in chunks(reader):
        if len(body) + len(chunk) > limit:
            raise too_large
        body += chunk
    return bytes(body)


async def chunks(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    """The data of a chunked body, strictly: hex sizes, no extensions, no trailers."""
    while True:
        line = await reader.readuntil(b"\r\n")
        if not CHUNK_SIZE.match(line):
            raise bad(f"malformed chunk size line {line[:20]!r}")
        size = int(line[:-2], 16)
        if size == 0:
            if await reader.readexactly(2) != b"\r\n":
                raise bad("trailers after a chunked body are refused")
            return
        for offset in range(0, size, CHUNK_BYTES):
            yield await reader.readexactly(min(CHUNK_BYTES, size - offset))
        if await reader.readexactly(2) != b"\r\n":
            raise bad("a chunk that does not end in CRLF")


def request_head(method: str, target: str, headers: list[tuple[str, str]]) -> bytes:
    """A request head the proxy writes: its own start line, Host and the given headers."""
    lines = [f"{method} {target} HTTP/1.1", "Host: docker",
             *(f"{name}: {value}" for name, value in headers), "", ""]
    return "\r\n".join(lines).encode("ascii")


async def copy_stream_body(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: Request
) -> None:
    """An opaque body (an image tar) copied in the proxy's own framing: the client's
    Content-Length kept, or its chunks parsed and written again by the proxy."""
    if not request.chunked:
        await _copy_exactly(reader, writer, request.length)
        return
    async for chunk in chunks(reader):
        writer.write(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
        await writer.drain()
    writer.write(b"0\r\n\r\n")
    await writer.drain()


async def copy_response_body(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: Head
) -> None:
    """Copy one response body as the daemon framed it (chunked, a length, or to its end)."""
    if head.chunked:
        while True:
            line = await reader.readuntil(b"\r\n")
            writer.write(line)
            size = int(line.split(b";")[0], 16)
            if size == 0:
                while (trailer := await reader.readuntil(b"\r\n")) != b"\r\n":
                    writer.write(trailer)
                writer.write(b"\r\n")
                await writer.drain()
                return
            await _copy_exactly(reader, writer, size + 2)
    elif head.length is not None:
        await _copy_exactly(reader, writer, head.length)
    else:
        while data := await reader.read(CHUNK_BYTES):
            writer.write(data)
            await writer.drain()


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


def answer(status: int, body: bytes, reason: str = "") -> bytes:
    """A complete JSON response with the given body."""
    head = Head(
        f"HTTP/1.1 {status} {reason or REASONS.get(status, 'Error')}",
        (("Content-Type", "application/json"), ("Content-Length", str(len(body)))),
    )
    return head.encode() + body


def refusal(status: int, message: str) -> bytes:
    """A complete JSON error response, as the daemon would send it."""
    return answer(status, json.dumps({"message": f"repro-gate docker proxy: {message}"}).encode())


async def read_response_body(reader: asyncio.StreamReader, head: Head, limit: int) -> bytes:
    """A whole response body from the daemon (a create's answer, a network inspect)."""
    if head.chunked:
        body = bytearray()
        while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
            body += (await reader.readexactly(size + 2))[:-2]
            if len(body) > limit:
                raise ConnectionError("the daemon's answer is too large")
        while await reader.readuntil(b"\r\n") != b"\r\n":
            pass
        return bytes(body)
    if head.length is not None:
        return await reader.readexactly(head.length)
    return await reader.read(limit)
