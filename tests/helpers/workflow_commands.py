"""A job log read as the Actions runner reads it: which lines are live workflow commands.

The runner takes a line as a command when, after its leading whitespace, it starts with `::`,
or when it holds `##[` anywhere (the older syntax). After `::stop-commands::<token>` it takes
none until the line `::<token>::`.
"""

from __future__ import annotations

import re

STOP = re.compile(r"::stop-commands::(?P<token>.+)")


def live_commands(log: str) -> list[str]:
    """The lines of `log` the runner would act on, in order, the window lines included."""
    live: list[str] = []
    token: str | None = None
    for line in log.splitlines():
        text = line.lstrip()
        if token is not None:
            if text == f"::{token}::":
                live.append(text)
                token = None
            continue
        if text.startswith("::") or "##[" in text:
            live.append(text)
            if stopped := STOP.fullmatch(text):
                token = stopped["token"]
    return live


def window_tokens(log: str) -> list[str]:
    """The tokens of the windows `log` opens, in order."""
    return [found["token"] for line in log.splitlines() if (found := STOP.fullmatch(line))]


def commands_besides_windows(log: str) -> list[str]:
    """The live commands of `log` other than the lines that open and end its windows."""
    tokens = window_tokens(log)
    windows = {f"::stop-commands::{token}" for token in tokens} | {f"::{t}::" for t in tokens}
    return [line for line in live_commands(log) if line not in windows]
