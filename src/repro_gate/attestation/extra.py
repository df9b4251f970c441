"""Whether the signing library of `repro-gate[attest]` is installed: the gate and the action's
image do without it, `attest` and `verify` need it."""

from __future__ import annotations

from importlib.util import find_spec

from repro_gate.errors import MissingDependencyError

INSTALL = "pip install 'repro-gate[attest]'"


def require(command: str) -> None:
    """Raise a one-line MissingDependencyError when `cryptography` is not installed."""
    if find_spec("cryptography") is None:
        raise MissingDependencyError(command, INSTALL)
