"""The control socket of the process holding a slot, as `runner reset-slot` uses it: one
request, one answer, in root's folder; no process, no answer."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from repro_gate.runner.slot_control import (
    Answer,
    ControlAnswer,
    ControlServer,
    ask_reset,
    control_socket,
)
from repro_gate.runner.slots import Slot


@pytest.fixture
def short() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="rg-ctl-") as folder:  # a socket path: short
        yield Path(folder)


@pytest.mark.parametrize("answer", [ControlAnswer(Answer.FRESH, ""),
                                    ControlAnswer(Answer.SURVIVED, "container 0123, volume v"),
                                    ControlAnswer(Answer.ERROR, "the engine did not start")])
def test_a_reset_asked_for_is_answered_with_what_the_holder_said(
    short: Path, answer: ControlAnswer
) -> None:
    path = control_socket(short, Slot(1, "GPU-1", "x"))
    asked: list[str] = []

    def reset() -> ControlAnswer:
        asked.append("reset")
        return answer

    server = ControlServer(path, reset)
    try:
        assert ask_reset(path) == answer
    finally:
        server.close()
    assert asked == ["reset"]
    assert path == short / "control" / "slot1.sock"
    assert (path.parent.stat().st_mode & 0o777) == 0o700
    assert not path.exists()


def test_no_process_holding_the_slot_is_no_answer(short: Path) -> None:
    assert ask_reset(short / "control" / "slot0.sock") is None
