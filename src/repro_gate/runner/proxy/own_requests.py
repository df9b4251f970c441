"""The requests the proxy sends the daemon on its own, never a job's: who owns a container (an
exact inspect), and a named volume made first, with the slot's labels, before a create that
would make it unlabelled. Each on a connection of its own; a failure is the job's `Refused`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from repro_gate.runner.proxy.framing import (
    Head,
    Refused,
    read_response_body,
    read_response_head,
    request_head,
)
from repro_gate.runner.proxy.relay import close, connect

MAX_ANSWER_BYTES = 4 * 1024 * 1024  # an inspect is a few KiB


async def ask(upstream: Path, method: str, target: str,
              body: bytes | None = None) -> tuple[Head, bytes]:
    """One request of the proxy's own to the daemon: its answer's head and body."""
    reader, writer = await connect(upstream)
    try:
        headers = [] if body is None else [("Content-Type", "application/json"),
                                           ("Content-Length", str(len(body)))]
        writer.write(request_head(method, target, headers) + (body or b""))
        await writer.drain()
        head = await read_response_head(reader)
        answer = await read_response_body(reader, head, MAX_ANSWER_BYTES)
    finally:
        await close(writer)
    return head, answer


async def inspect_container(upstream: Path, container: str) -> dict[str, Any] | None:
    """The daemon's inspect of exactly this container ID, None when there is none."""
    head, body = await ask(upstream, "GET", f"/containers/{container}/json")
    if head.status == 404:
        return None
    if head.status != 200:
        raise Refused(502, f"cannot check who owns container {container}: the daemon"
                           f" answered {head.status}")
    found = json.loads(body)
    return found if isinstance(found, dict) else None


async def create_volume(upstream: Path, name: str, labels: dict[str, str]) -> None:
    """A named volume with `labels` (the daemon answers an existing one as it is)."""
    body = json.dumps({"Name": name, "Labels": labels}).encode()
    head, answer = await ask(upstream, "POST", "/volumes/create", body)
    if head.status in (200, 201):
        return
    try:
        message = str(json.loads(answer).get("message") or "")
    except (UnicodeDecodeError, json.JSONDecodeError, AttributeError):
        message = ""
    raise Refused(head.status if 400 <= head.status < 500 else 502,
                  f"volume {name[:70]!r} could not be created: {message[:200]}")
