"""The gate's notices: the lines it says beside the runs' output (a warning, a wait for the
lock, a report that failed). Inner layers say them here and never print; the command line
decides where they go (`cli/sinks.py`), stderr unless it says otherwise.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

NoticeSink = Callable[[str], None]  # takes one whole line, `repro-gate: ...`
PREFIX = "repro-gate: "


def to_stderr(line: str) -> None:
    """The default: the line on stderr, flushed (a wait for the lock must show at once)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


_sinks: list[NoticeSink] = [to_stderr]  # the last one is where notices go now


def say(text: str) -> None:
    """`repro-gate: <text>` to the current sink."""
    _sinks[-1](PREFIX + text)


def warning(text: str) -> None:
    """`repro-gate: warning: <text>`: something went wrong that does not change the verdict."""
    say(f"warning: {text}")


def error(text: str) -> None:
    """`repro-gate: error: <text>`: an error the exit code reports but no record holds."""
    say(f"error: {text}")


@contextmanager
def sent_to(sink: NoticeSink) -> Iterator[None]:
    """Notices said inside the block go to `sink`."""
    _sinks.append(sink)
    try:
        yield
    finally:
        _sinks.remove(sink)
