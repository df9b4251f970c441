"""Nondeterministic-op alerts: recognise torch's messages and find the user's line behind them."""

from __future__ import annotations

import os
import re
import sysconfig
from collections.abc import Iterable
from dataclasses import dataclass
from types import FrameType, TracebackType

KIND_OP = "nondeterministic_op"
KIND_DEFAULT = "nondeterministic_default"
KIND_STRICT = "strict_error"

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

    def as_json(self) -> dict[str, object]:
        return {
            "op": self.op,
            "file": self.file,
            "line": self.line,
            "count": self.count,
            "kind": self.kind,
            "message": self.message,
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
