"""A command string in a container: why it could not run, asked of the ended container.

Docker starts the training under tini (`init`), so a missing /bin/sh is no error of the daemon:
tini exits with code 127, as the shell does for a program it cannot find. The ended container
still holds the image's files, so the daemon can say which of the two it was.
"""

from __future__ import annotations

from typing import Any

import docker.errors
import requests.exceptions

from repro_gate.errors import ErrorKind, GateError
from repro_gate.launch.base import RunSpec
from repro_gate.launch.shell import NOT_EXECUTABLE, NOT_FOUND, SHELL, shell_failure, shell_text


def check_shell(container: Any, spec: RunSpec, exit_code: int | None, image: str) -> None:
    """Raise when a command string could not run: the image has no shell, or the shell found no
    program (or could not execute it)."""
    if shell_text(spec.argv) is None or exit_code not in (NOT_FOUND, NOT_EXECUTABLE):
        return
    if not has_file(container, SHELL):
        raise GateError(
            f"image {image} has no {SHELL} to run the command string;"
            " give the command as a list (`command: [python, train.py]`)",
            kind=ErrorKind.COMMAND_NOT_FOUND,
        )
    missing = shell_failure(spec.argv, exit_code, spec.log_path,
                            f"run {spec.name}, in image {image}")
    if missing is not None:
        raise missing


def has_file(container: Any, path: str) -> bool:
    """Whether the container's file system has `path` (a file, or a link, even a dangling one)."""
    try:
        stream, _ = container.get_archive(path)
        for _chunk in stream:  # read to the end: the answer holds the file (a shell: ~1 MB)
            pass
    except docker.errors.NotFound:
        return False
    except (docker.errors.APIError, requests.exceptions.RequestException):
        return True  # unknown: the shell's own message is the better guess
    return True
