"""The proxy's connections to the daemon and the raw relay after an attach or exec was
validated: a daemon that is down is a 502, bytes pass both ways, a half-close is passed on."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from repro_gate.runner.proxy.framing import Refused
from repro_gate.runner.proxy.relay import connect, pump, relay

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def connected_pair() -> tuple[Streams, Streams]:
    """Both ends of a connected Unix socket pair, as asyncio streams."""
    one, other = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    return (await asyncio.open_unix_connection(sock=one),
            await asyncio.open_unix_connection(sock=other))


def test_a_daemon_that_is_down_is_a_502_that_names_its_socket(tmp_path: Path) -> None:
    missing = tmp_path / "docker.sock"

    with pytest.raises(Refused) as refused:
        asyncio.run(connect(missing))

    assert (refused.value.status, refused.value.close) == (502, True)
    assert refused.value.message == (f"cannot reach the Docker daemon at {missing}:"
                                     " No such file or directory")


def test_connect_reaches_a_listening_socket(tmp_path: Path) -> None:
    path = tmp_path / "d.sock"

    async def scenario() -> bytes:
        async def greet(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(b"hello")
            await writer.drain()
            writer.close()

        server = await asyncio.start_unix_server(greet, path=str(path))
        async with server:
            reader, writer = await connect(path)
            received = await reader.read()
            writer.close()
            return received

    assert asyncio.run(scenario()) == b"hello"


def test_pump_copies_everything_then_closes_the_writing_side() -> None:
    async def scenario() -> bytes:
        source = asyncio.StreamReader()
        source.feed_data(b"frame one, ")
        source.feed_data(b"frame two")
        source.feed_eof()
        (_, writer), (far_reader, far_writer) = await connected_pair()
        await pump(source, writer)
        received = await far_reader.read()  # ends: pump passed the end of input on
        writer.close()
        far_writer.close()
        return received

    assert asyncio.run(scenario()) == b"frame one, frame two"


def test_relay_carries_both_ways_and_output_still_comes_after_the_client_closes_stdin() -> None:
    async def scenario() -> tuple[bytes, bytes]:
        (client_reader, client_writer), (job_reader, job_writer) = await connected_pair()
        (upstream_reader, upstream_writer), (daemon_reader, daemon_writer) = \
            await connected_pair()

        async def daemon() -> bytes:
            seen = await daemon_reader.read()  # until the client's side closed (stdin EOF)
            daemon_writer.write(b"output: " + seen.upper())
            await daemon_writer.drain()
            daemon_writer.close()
            return seen

        async def client() -> bytes:
            client_writer.write(b"stdin")
            await client_writer.drain()
            client_writer.write_eof()
            return await client_reader.read()

        served = asyncio.ensure_future(
            relay(upstream_reader, upstream_writer, job_reader, job_writer, b"early "))
        seen, output = await asyncio.gather(daemon(), client())
        await served
        for writer in (client_writer, job_writer, upstream_writer):
            writer.close()
        return seen, output

    seen, output = asyncio.run(scenario())

    assert seen == b"early stdin"
    assert output == b"output: EARLY STDIN"
