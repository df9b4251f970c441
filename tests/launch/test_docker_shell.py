"""Why a command string could not run in a container: no /bin/sh in the image, or a program the
shell could not find. The ended container is asked through `get_archive`; a small stand-in
answers as the daemon does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import docker.errors
import pytest

from repro_gate.errors import ErrorKind, GateError
from repro_gate.launch.base import RunSpec
from repro_gate.launch.docker_shell import check_shell, has_file
from repro_gate.launch.shell import NOT_FOUND, shell_argv


class EndedContainer:
    """The daemon's answers about an ended container's files."""

    def __init__(self, files: set[str], error: Exception | None = None) -> None:
        self.files = files
        self.error = error
        self.asked: list[str] = []

    def get_archive(self, path: str) -> tuple[Iterator[bytes], dict[str, object]]:
        self.asked.append(path)
        if self.error is not None:
            raise self.error
        if path not in self.files:
            raise docker.errors.NotFound(f"Could not find the file {path} in container")
        return iter([b"tar ", b"bytes"]), {"name": path}


def spec(tmp_path: Path, argv: list[str]) -> RunSpec:
    log = tmp_path / "A.log"
    log.write_text("sh: 1: trian.py: not found\n", encoding="utf-8")
    return RunSpec("A", "deterministic", argv, tmp_path, tmp_path / "A", {}, None, log, [])


def test_an_image_without_a_shell_is_told_to_give_the_command_as_a_list(
    tmp_path: Path,
) -> None:
    with pytest.raises(GateError) as raised:
        check_shell(EndedContainer(set()), spec(tmp_path, shell_argv("trian.py")), NOT_FOUND,
                    "t:1")

    assert raised.value.kind == ErrorKind.COMMAND_NOT_FOUND
    assert raised.value.message == (
        "image t:1 has no /bin/sh to run the command string;"
        " give the command as a list (`command: [python, train.py]`)")


def test_a_program_the_shell_did_not_find_is_named_with_its_message(tmp_path: Path) -> None:
    with pytest.raises(GateError) as raised:
        check_shell(EndedContainer({"/bin/sh"}), spec(tmp_path, shell_argv("trian.py")),
                    NOT_FOUND, "t:1")

    assert raised.value.message == ("command not found: trian.py"
                                    " (the shell said: sh: 1: trian.py: not found;"
                                    " run A, in image t:1)")


def test_the_container_is_not_asked_about_other_ends(tmp_path: Path) -> None:
    container = EndedContainer(set())

    check_shell(container, spec(tmp_path, shell_argv("python t.py")), 0, "t:1")
    check_shell(container, spec(tmp_path, shell_argv("python t.py")), 1, "t:1")
    check_shell(container, spec(tmp_path, ["trian.py"]), NOT_FOUND, "t:1")

    assert container.asked == []


def test_an_unanswered_question_counts_as_a_file_that_is_there() -> None:
    assert has_file(EndedContainer({"/bin/sh"}), "/bin/sh")
    assert not has_file(EndedContainer(set()), "/bin/sh")
    assert has_file(EndedContainer(set(), docker.errors.APIError("daemon busy")), "/bin/sh")
