"""A run's output on its way out: every byte to the log file, lines (cut when huge) to a sink.

Output is read in bounded chunks, never line by line: a training printing a progress bar with
`\\r` and no newline writes one "line" of hundreds of megabytes, and the gate's memory must not
follow it.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable
from typing import BinaryIO

from repro_gate import credentials
from repro_gate.errors import ErrorKind, GateError
from repro_gate.launch.base import LineSink, RunSpec

CHUNK_BYTES = 65536
MAX_LINE_BYTES = 64 * 1024
CUT_MARKER = " [… line cut at 64 KiB; the log file has all of it]"


def open_log(spec: RunSpec) -> BinaryIO:
    """The run's log file, new and empty."""
    try:
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        return spec.log_path.open("wb")
    except OSError as error:
        raise GateError(
            f"cannot write the log of run {spec.name} at {spec.log_path}: {error.strerror}",
            kind=ErrorKind.OUTPUT_DIR,
        ) from None


class LineSplitter:
    """Cuts chunks of output into lines for a sink; a line over the cap is cut, with a marker."""

    def __init__(self, sink: LineSink, cap: int = MAX_LINE_BYTES) -> None:
        self.sink = sink
        self.cap = cap
        self.pending = b""
        self.cutting = False  # the rest of an over-long line is being skipped

    def feed(self, chunk: bytes) -> None:
        """Emit every line `chunk` completes; keep at most `cap` bytes of the unfinished one."""
        *lines, rest = (self.pending + chunk).split(b"\n")
        for raw in lines:
            if not self.cutting:
                self._emit(raw)
            self.cutting = False
        if self.cutting:
            rest = b""
        elif len(rest) > self.cap:
            self._emit(rest[: self.cap], CUT_MARKER)
            self.cutting, rest = True, b""
        self.pending = rest

    def close(self) -> None:
        """Emit the last line when the output did not end with a newline."""
        if self.pending and not self.cutting:
            self._emit(self.pending)
        self.pending = b""

    def _emit(self, raw: bytes, suffix: str = "") -> None:
        self.sink(raw.decode("utf-8", errors="replace").rstrip("\r") + suffix)


class OutputPump:
    """Copies chunks to the log file and the sink in a thread; the pump owns (and closes) the log.

    Owning the log is what makes late output harmless: nothing else closes the file under it.
    """

    def __init__(self, log: BinaryIO, sink: LineSink) -> None:
        self.log = log
        self.lines = LineSplitter(_quiet_on_error(sink))
        self.masker = credentials.StreamMasker(credentials.credential_values(os.environ))
        # Set when the run is over: stop reading, even if a stray process still writes.
        self.stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, chunks: Iterable[bytes]) -> None:
        """Start copying `chunks` (an iterator that may block) in a daemon thread."""
        self._thread = threading.Thread(target=self._copy, args=(chunks,), daemon=True)
        self._thread.start()

    def finish(self, drain_seconds: float) -> None:
        """Let the pump drain for up to `drain_seconds`, then stop it; close the log if unused."""
        if self._thread is None:
            self.log.close()
            return
        self._thread.join(drain_seconds)
        self.stopping.set()
        self._thread.join(1.0)  # a reader blocked for good is abandoned (it is a daemon)

    def _copy(self, chunks: Iterable[bytes]) -> None:
        writing = True
        try:
            for raw in chunks:
                if self.stopping.is_set():
                    break
                writing = self._write(self.masker.feed(raw), writing)
            self._write(self.masker.flush(), writing)
            self.lines.close()
        finally:
            with contextlib.suppress(OSError):
                self.log.close()


    def _write(self, chunk: bytes, writing: bool) -> bool:
        """Log and show `chunk`; returns whether the log can still be written."""
        if writing:
            try:
                self.log.write(chunk)
                self.log.flush()
            except OSError:  # disk full: keep draining so the training never blocks
                writing = False
        self.lines.feed(chunk)
        return writing


def _quiet_on_error(sink: LineSink) -> LineSink:
    """The sink, falling silent once it fails (a closed stderr must not stop the log)."""
    failed = False

    def guarded(line: str) -> None:
        nonlocal failed
        if failed:
            return
        try:
            sink(line)
        except (OSError, ValueError):
            failed = True

    return guarded
