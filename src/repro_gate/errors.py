"""Errors a user can act on.

Every failure the gate can explain is a `GateError`: one line for the console, a stable `kind`
for the manifest's `reasons`, and exit code 2 (the verdict `error`).
"""

from __future__ import annotations

EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_ERROR = 2


class GateError(Exception):
    """A problem the user can fix; reported as one line, never a traceback."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, *, kind: str, detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind
        self.detail = detail

    def __str__(self) -> str:
        return self.message


class ConfigError(GateError):
    """The configuration is missing, unparseable or against its schema."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message, kind="config", detail=detail)


class MissingDependencyError(GateError):
    """An optional dependency is needed for what was asked."""

    def __init__(self, what: str, install: str) -> None:
        super().__init__(f"{what} needs {install}", kind="missing_dependency")
