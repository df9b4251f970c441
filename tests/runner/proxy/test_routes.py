"""The proxy's endpoint allow-list: how each request target is handled, and why one is refused."""

from __future__ import annotations

import pytest

from repro_gate.runner.proxy.routes import Handling, route

CID = "0123456789abcdef" * 4  # a full container ID


@pytest.mark.parametrize(("method", "target", "handling", "reason"), [
    ("GET", f"/v1.41/containers/{CID}/logs?follow=1", Handling.PASS, ""),
    ("POST", "/v1.41/containers/create?name=x", Handling.JSON, ""),
    ("POST", f"/containers/{CID}/update", Handling.JSON, ""),
    ("PUT", f"/v1.41/containers/{CID}/archive?path=/w", Handling.STREAM, ""),
    ("POST", "/v1.41/images/load?quiet=1", Handling.STREAM, ""),
    ("GET", "/v1.41/images/127.0.0.1:5055/repo/python@sha256:ab/json", Handling.PASS, ""),
    ("POST", "/v1.23/containers/abc/start", Handling.REFUSE, "API versions below 1.24"),
    ("POST", "/v1.41/swarm/init", Handling.REFUSE, "swarm mode is refused"),
    ("POST", "/v1.41/plugins/pull", Handling.REFUSE, "plugins are refused"),
    ("POST", "/v1.41/containers/prune", Handling.REFUSE, "prune is refused"),
    ("POST", "/v1.41/session", Handling.REFUSE, "BuildKit sessions are refused"),
    ("POST", "/v1.41/build?networkmode=host", Handling.REFUSE, "builds are refused"),
    ("POST", "/v1.41/build?cgroupparent=/", Handling.REFUSE, "builds are refused"),
    ("GET", "/v1.41/system/df", Handling.REFUSE, "system/df is refused"),
    ("POST", "/v1.41/images/create?fromSrc=http://127.0.0.1:1/x", Handling.REFUSE,
     "query parameter 'fromSrc' of /images/create is refused"),
    ("POST", "/v1.41/images/create?fromImage=x&remote=http://127.0.0.1:1/", Handling.REFUSE,
     "query parameter 'remote'"),
    ("POST", f"/v1.41/containers/{CID}/../../swarm/init", Handling.REFUSE,
     "not in its clean form"),
    ("GET", "/v1.41/secrets", Handling.REFUSE, "swarm mode is refused"),
    ("POST", f"/v1.41/containers/{CID}/checkpoints", Handling.REFUSE, "not in the proxy's allow"),
    ("GET", "/v1.41/containers/runner-0/json", Handling.REFUSE,
     "containers are addressed by their full 64-hex ID here, not 'runner-0'"),
    ("GET", f"/v1.41/containers/{CID[:12]}/json", Handling.REFUSE, "full 64-hex ID"),
    ("POST", "/v1.41/exec/e1/start", Handling.REFUSE, "execs are addressed by their full"),
    ("POST", f"/v1.41/containers/create?name={CID[:12]}", Handling.REFUSE,
     "reads as a container ID"),
])
def test_routes(method: str, target: str, handling: Handling, reason: str) -> None:
    decision = route(method, target).decision

    assert decision.handling is handling
    assert reason in decision.reason

