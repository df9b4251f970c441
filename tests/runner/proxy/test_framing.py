"""Strict HTTP/1.1 for the proxy: request heads parsed from bytes, ambiguous framings refused,
bodies read from a stream (lengths and chunks), and the heads and answers the proxy writes."""

from __future__ import annotations

import asyncio
import json

import pytest

from repro_gate.runner.proxy.framing import (
    Head,
    Refused,
    Request,
    answer,
    parse_request,
    read_body,
    read_request,
    refusal,
    request_head,
)


def test_a_request_head_is_parsed_into_its_parts_and_framing() -> None:
    request = parse_request(b"POST /v1.41/containers/create?name=job HTTP/1.1\r\n"
                            b"Host: docker\r\nContent-Type: application/json\r\n"
                            b"Content-Length:   42  ")

    assert (request.method, request.target) == ("POST", "/v1.41/containers/create?name=job")
    assert (request.length, request.chunked, request.has_body) == (42, False, True)
    assert request.head.header("content-type") == "application/json"
    assert request.head.values("CONTENT-LENGTH") == ["42"]


def test_a_chunked_request_has_a_body_of_unknown_length() -> None:
    request = parse_request(b"PUT /containers/x/archive HTTP/1.1\r\nHost: docker\r\n"
                            b"Transfer-Encoding: Chunked")

    assert (request.length, request.chunked, request.has_body) == (0, True, True)


@pytest.mark.parametrize(("raw", "reason"), [
    (b"GET / HTTP/1.1\r\nHost: docker\nX-A: b", "a bare LF or CR in the request head"),
    (b"GET / HTTP/1.1\r\nHost: docker\rX-A: b", "a bare LF or CR in the request head"),
    (b"GET / HTTP/1.1\r\nX-A: b\r\n c", "obsolete line folding is refused"),
    (b"POST / HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked",
     "both Content-Length and Transfer-Encoding are refused"),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked",
     "Transfer-Encoding 'gzip, chunked' is refused (only 'chunked')"),
    (b"POST / HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 2",
     "a repeated Content-Length or Transfer-Encoding is refused"),
    (b"POST / HTTP/1.1\r\nContent-Length: -1", "Content-Length '-1' is refused"),
    (b"POST / HTTP/1.1\r\nContent-Length: 1234567890123456", "Content-Length '1234567890123456'"),
    (b"POST / HTTP/1.1\r\nExpect: 100-continue", "Expect is refused"),
    (b"GET / HTTP/1.1\r\nX A: b", "malformed header line 'X A: b'"),
    (b"GET / HTTP/1.1\r\nX-A: b\x01", "a control character in header 'X-A' is refused"),
    (b"GET / HTTP/1.1\r\nHost: d\xc3\xb6cker", "non-ASCII bytes in the request head"),
    (b"GET / HTTP/1.0", "malformed request line 'GET / HTTP/1.0' (HTTP/1.1 only)"),
    (b"GET  / HTTP/1.1", "malformed request line"),
    (b"GET http://docker/version HTTP/1.1", "malformed request target 'http://docker/version'"),
    (b"GET //docker/version HTTP/1.1", "malformed request target '//docker/version'"),
    (b"GET /version#frag HTTP/1.1", "malformed request target"),
    (b"GET / HTTP/1.1" + b"\r\nX-A: b" * 101, "more than 100 header lines"),
])
def test_an_ambiguous_head_is_a_400_that_closes_the_connection(raw: bytes, reason: str) -> None:
    with pytest.raises(Refused) as refused:
        parse_request(raw)

    assert (refused.value.status, refused.value.close) == (400, True)
    assert reason in refused.value.message


def read(data: bytes, limit: int = 1024) -> tuple[Request | None, bytes]:
    """The request head and body `read_request` and `read_body` take from `data`."""
    async def scenario() -> tuple[Request | None, bytes]:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        request = await read_request(reader)
        body = b"" if request is None else await read_body(reader, request, limit)
        return request, body

    return asyncio.run(scenario())


def test_a_chunked_body_is_read_without_its_framing() -> None:
    request, body = read(b"POST /images/load HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                         b"5\r\nhello\r\nA\r\n, chunked!\r\n0\r\n\r\n")

    assert request is not None and request.chunked
    assert body == b"hello, chunked!"


@pytest.mark.parametrize(("data", "status", "reason"), [
    (b"POST / HTTP/1.1\r\nContent-Length: 2048\r\n\r\n", 413, "request body over"),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n" + b"x" * 1024
     + b"\r\n1\r\nx\r\n0\r\n\r\n", 413, "request body over"),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\n\r\n",
     400, "malformed chunk size line"),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Trailer: 1\r\n\r\n",
     400, "trailers after a chunked body are refused"),
    (b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabcd\r\n0\r\n\r\n",
     400, "a chunk that does not end in CRLF"),
    (b"GET / HTTP/1.1\r\nHost: do", 400, "the connection ended inside a request head"),
])
def test_bodies_over_the_limit_or_badly_chunked_are_refused(
    data: bytes, status: int, reason: str
) -> None:
    with pytest.raises(Refused) as refused:
        read(data)

    assert refused.value.status == status and refused.value.close
    assert reason in refused.value.message


def test_a_clean_end_of_the_connection_is_no_request() -> None:
    assert read(b"") == (None, b"")


def test_a_daemon_response_head_is_read_by_its_headers() -> None:
    head = Head.parse(b"HTTP/1.1 101 UPGRADED\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n"
                      b"Content-Type: application/vnd.docker.raw-stream")
    chunked = Head.parse(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close")

    assert (head.status, head.length, head.chunked, head.closes) == (101, None, False, False)
    assert (chunked.chunked, chunked.closes) == (True, True)
    assert Head.parse(head.encode()[:-4]) == head
    with pytest.raises(ConnectionError, match="malformed status line"):
        _ = Head.parse(b"HTTP/1.1 OK").status
    with pytest.raises(ConnectionError, match="malformed header"):
        Head.parse(b"HTTP/1.1 200 OK\r\nno colon here")


def test_the_proxy_writes_its_own_heads_and_refusals() -> None:
    head = request_head("POST", "/containers/create", [("Content-Length", "2")])
    written = refusal(403, "Privileged is refused")
    status_line, _, body = written.partition(b"\r\n")
    headers, _, payload = body.partition(b"\r\n\r\n")

    assert head == (b"POST /containers/create HTTP/1.1\r\nHost: docker\r\n"
                    b"Content-Length: 2\r\n\r\n")
    assert parse_request(head[:-4]).length == 2
    assert status_line == b"HTTP/1.1 403 Forbidden"
    assert json.loads(payload) == {"message": "repro-gate docker proxy: Privileged is refused"}
    assert f"Content-Length: {len(payload)}".encode() in headers
    assert answer(599, b"{}").startswith(b"HTTP/1.1 599 Error\r\n")
