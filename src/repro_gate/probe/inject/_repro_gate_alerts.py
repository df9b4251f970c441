"""Nondeterministic-op alerts: recognise torch's messages and find the user's line behind them."""

from __future__ import annotations

import os
import re
import sysconfig
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import FrameType, TracebackType
from typing import Any

KIND_OP = "nondeterministic_op"
KIND_DEFAULT = "nondeterministic_default"
KIND_STRICT = "strict_error"
MAX_STEPS = 20  # steps listed per alert: enough to place it at the first divergent step

_WARN_ONLY = re.compile(
    r"(\S+) does not have a deterministic implementation, but you set "
    r"'torch\.use_deterministic_algorithms\(True, warn_only=True\)'"
)
_STRICT = re.compile(
    r"(\S+) does not have a deterministic implementation, but you set "
    r"'torch\.use_deterministic_algorithms\(True\)'"
)
# Attention kernels that keep a nondeterministic default under warn_only (a once-only warning).
_DEFAULT_FAMILY = (
    ("Flash Attention defaults to a non-deterministic algorithm", "flash"),
    ("Memory Efficient attention defaults to a non-deterministic algorithm", "mem_efficient"),
    ("cuDNN Attention defaults to a non-deterministic algorithm", "cudnn"),
    ("cuDNN SDPA is not deterministic", "cudnn"),
)
# For warnings.filterwarnings: every warning of both families, and nothing else.
WARNING_PATTERN = "|".join(
    [r"\S+ does not have a deterministic implementation"]
    + [re.escape(prefix) for prefix, _ in _DEFAULT_FAMILY]
)


@dataclass
class Alert:
    """Occurrences of one nondeterministic op at one place in the user's code."""

    op: str
    file: str
    line: int
    kind: str
    message: str
    count: int = 0
    steps: list[int] = field(default_factory=list)  # the first MAX_STEPS steps it ran in

    def note(self, step: int) -> None:
        """One more occurrence, during optimizer step `step` (the step in progress)."""
        self.count += 1
        if len(self.steps) < MAX_STEPS and step not in self.steps:
            self.steps.append(step)

    def as_json(self) -> dict[str, object]:
        return {
            "op": self.op,
            "file": self.file,
            "line": self.line,
            "count": self.count,
            "kind": self.kind,
            "message": self.message,
            "steps": self.steps,
        }


def classify_warning(text: str) -> tuple[str, str] | None:
    """(op, kind) when a warning's text is one of torch's nondeterminism warnings."""
    match = _WARN_ONLY.match(text)
    if match:
        return match.group(1), KIND_OP
    for prefix, backend in _DEFAULT_FAMILY:
        if text.startswith(prefix):
            return f"scaled_dot_product_attention({backend})", KIND_DEFAULT
    return None


def classify_error(error: BaseException) -> str | None:
    """The op named by a strict-mode determinism RuntimeError, else None."""
    if not isinstance(error, RuntimeError):
        return None
    match = _STRICT.match(str(error))
    return match.group(1) if match else None


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


class UserFrames:
    """Tells the user's source files from torch's, installed packages', the stdlib's and ours."""

    def __init__(self, excluded_dirs: Iterable[str]) -> None:
        paths = sysconfig.get_paths()
        dirs = [paths.get("stdlib"), paths.get("platstdlib"), *excluded_dirs]
        self._excluded = tuple(os.path.join(os.path.realpath(d), "") for d in dirs if d)
        self._verdicts: dict[str, bool] = {}

    def is_user_file(self, filename: str) -> bool:
        verdict = self._verdicts.get(filename)
        if verdict is None:
            verdict = self._judge(filename)
            self._verdicts[filename] = verdict
        return verdict

    def _judge(self, filename: str) -> bool:
        if not filename or filename.startswith("<"):
            return False
        path = os.path.realpath(filename)
        parts = path.split(os.sep)
        if "site-packages" in parts or "dist-packages" in parts:
            return False
        return not path.startswith(self._excluded)

    def innermost_in_stack(self, frame: FrameType | None) -> tuple[str, int] | None:
        """Walking outwards from `frame`, the first place in the user's code."""
        while frame is not None:
            filename = frame.f_code.co_filename
            if self.is_user_file(filename):
                return os.path.abspath(filename), frame.f_lineno
            frame = frame.f_back
        return None

    def innermost_in_traceback(self, tb: TracebackType | None) -> tuple[str, int] | None:
        """The innermost place in the user's code among a traceback's frames."""
        found = None
        while tb is not None:
            filename = tb.tb_frame.f_code.co_filename
            if self.is_user_file(filename):
                found = (os.path.abspath(filename), tb.tb_lineno)
            tb = tb.tb_next
        return found


class AlertRecorder:
    """One process's alerts, counted per op, place in the user's code and kind."""

    def __init__(self, excluded_dirs: Iterable[str], current_step: Callable[[], int]) -> None:
        self.user_frames = UserFrames(excluded_dirs)
        self._current_step = current_step
        self._alerts: dict[tuple[str, str, int, str], Alert] = {}
        self._shown_sites: set[tuple[str, str, int]] = set()

    def record_warning(self, message: warnings.WarningMessage, frame: FrameType | None) -> bool:
        """Record one warning; False when it repeats a site already shown to the user."""
        text = str(message.message)
        found = classify_warning(text)
        if found is None:
            return True
        op, kind = found
        site = self.user_frames.innermost_in_stack(frame)
        file, line = site if site is not None else (message.filename, message.lineno)
        self._count(op, file, line, kind, first_line(text))
        shown_key = (op, file, line)
        if shown_key in self._shown_sites:
            return False
        self._shown_sites.add(shown_key)
        return True

    def record_uncaught(self, error: BaseException | None, tb: TracebackType | None) -> None:
        """Record the strict-mode error in an uncaught exception's chain, if there is one."""
        seen: set[int] = set()
        while error is not None and id(error) not in seen:
            seen.add(id(error))
            op = classify_error(error)
            if op is not None:
                site = self.user_frames.innermost_in_traceback(error.__traceback__ or tb)
                file, line = site if site is not None else ("", 0)
                self._count(op, file, line, KIND_STRICT, first_line(str(error)))
                break
            error = error.__cause__ or error.__context__

    def as_json(self) -> list[dict[str, Any]]:
        """Every alert, ordered by place, op and kind."""
        alerts = [alert.as_json() for alert in self._alerts.values()]
        alerts.sort(key=lambda a: (a["file"], a["line"], a["op"], a["kind"]))
        return alerts

    def _count(self, op: str, file: str, line: int, kind: str, message: str) -> None:
        key = (op, file, line, kind)
        alert = self._alerts.get(key)
        if alert is None:
            alert = self._alerts[key] = Alert(op, file, line, kind, message)
        alert.note(self._current_step())
