"""The control socket of the process that holds a slot (`serve`, `slot-endpoint`): how
`repro-gate runner reset-slot` asks it to reset the slot while it runs.

    <work_root>/control/slot<N>.sock     root's, in a folder only root may enter

One request per connection, one line each way: `reset` is answered `fresh`, `survived <what>`
or `error <why>`, once the reset has ended. The socket is never the slot user's: a job that
reached its engine's user can neither reach it nor put another in its place.
"""

from __future__ import annotations

import contextlib
import socket
import socketserver
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from repro_gate.runner.slots import Slot

CONTROL_FOLDER = "control"
RESET = b"reset"
ANSWER_BYTES = 64 * 1024
RESET_SECONDS = 600.0  # a reset restarts an engine: far less, unless the host is stuck


class Answer(str, Enum):
    """The first word of the control socket's answer."""

    FRESH = "fresh"
    SURVIVED = "survived"
    ERROR = "error"


@dataclass(frozen=True)
class ControlAnswer:
    answer: Answer
    detail: str  # what survived, or why the reset failed; empty when fresh


def control_socket(work_root: Path, slot: Slot) -> Path:
    return work_root / CONTROL_FOLDER / f"slot{slot.index}.sock"


class ControlServer:
    """The slot's control socket in a thread of its own; `reset()` answers each request."""

    def __init__(self, path: Path, reset: Callable[[], ControlAnswer]) -> None:
        self.path = path
        path.parent.mkdir(mode=0o700, exist_ok=True)
        path.parent.chmod(0o700)
        path.unlink(missing_ok=True)  # a killed process's socket

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                if self.rfile.readline(len(RESET) + 2).strip() != RESET:
                    self.wfile.write(b"error unknown request\n")
                    return
                done = reset()
                line = f"{done.answer.value} {done.detail}".strip().replace("\n", " ")
                self.wfile.write(line.encode("utf-8", errors="replace") + b"\n")

        self.server = socketserver.UnixStreamServer(str(path), Handler)
        path.chmod(0o600)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.2,),
                                       name=f"control-{path.stem}", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()
        with contextlib.suppress(OSError):
            self.path.unlink()


def ask_reset(path: Path) -> ControlAnswer | None:
    """Ask the process holding the slot to reset it; its answer, or None when no process
    listens there."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(RESET_SECONDS)
        try:
            client.connect(str(path))
        except (FileNotFoundError, ConnectionRefusedError):
            return None
        answer = b""
        try:
            client.sendall(RESET + b"\n")
            while not answer.endswith(b"\n") and len(answer) < ANSWER_BYTES:
                chunk = client.recv(ANSWER_BYTES)
                if not chunk:
                    break
                answer += chunk
        except OSError as error:  # it ended, or never answered
            return ControlAnswer(Answer.ERROR, f"the process holding the slot did not answer"
                                               f" ({error})")
    word, _, detail = answer.decode("utf-8", errors="replace").strip().partition(" ")
    try:
        return ControlAnswer(Answer(word), detail)
    except ValueError:  # an empty one: the holder failed before it could answer
        return ControlAnswer(Answer.ERROR, f"the process holding the slot answered {word!r}"
                                           " (its log says why)")
