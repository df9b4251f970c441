"""An audit run's context against the real per-slot proxy with no engine behind it: what the
filter refuses comes back as the proxy's 403, what it passes as its 502 (no daemon). The proxy
and the loopback server are shared by the tests of a module; each test gets its own names."""

from __future__ import annotations

import secrets
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.proxy_thread import RunningProxy

from repro_gate.runner.audit.canaries import Canaries, Loopback, OtherSlot
from repro_gate.runner.audit.engine import Engine
from repro_gate.runner.audit.steps import AuditTarget, Context
from repro_gate.runner.proxy.policy import SlotPolicy

SLOT_GPU = "GPU-11111111-2222-3333-4444-555555555555"
OTHER_GPU = "GPU-99999999-8888-7777-6666-555555555555"
OTHER_CONTAINER = "fedcba9876543210" * 4
IMAGE = "busybox@sha256:" + "7" * 64
SECRET = "5ec7e7"
PREFIX = "repro-gate-audit-test-"


@dataclass(frozen=True)
class Slot:
    """The audited slot's endpoint (the proxy), the loopback server and the folders."""

    proxy: RunningProxy
    loopback: Loopback
    folder: Path


@pytest.fixture(scope="module")
def slot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Slot]:
    folder = tmp_path_factory.mktemp("slot")
    for name in ("work/scratch", "host", "other-work"):
        (folder / name).mkdir(parents=True)
    proxy = RunningProxy(SlotPolicy(gpu_uuid=SLOT_GPU, work_folder=folder / "work"),
                         upstream=folder / "no-daemon.sock")
    with Loopback() as loopback:
        yield Slot(proxy, loopback, folder)
    proxy.stop()


@pytest.fixture
def audit(slot: Slot) -> Context:
    """A run on a slot whose work folder is <folder>/work, with canaries beside it; the names
    it makes (and so the loopback tokens) are its own."""
    work, other = slot.folder / "work", slot.folder / "other-work"
    target = AuditTarget(endpoint=slot.proxy.socket, work_folder=work, gpu_uuid=SLOT_GPU,
                         other_gpu_uuid=OTHER_GPU, other_endpoint=None,
                         other_work_folder=other, image=IMAGE)
    canaries = Canaries(SECRET, slot.folder / "host", slot.folder / "tmp-canary",
                        OtherSlot(other / ".canary", OTHER_CONTAINER, f"{PREFIX}canary"))
    return Context(Engine(slot.proxy.socket), target, canaries, slot.loopback, work / "scratch",
                   f"{PREFIX}{secrets.token_hex(3)}-")


Fetch = Callable[[Context, str], None]


@pytest.fixture
def fetched() -> Fetch:
    """Ask the loopback server for the URL of `token`, as an engine that fell for it would."""

    def fetch(context: Context, token: str) -> None:
        try:
            urllib.request.urlopen(context.loopback.url(token), timeout=5)
        except urllib.error.HTTPError as answer:  # it records the path, then answers 404
            assert answer.code == 404

    return fetch
