"""How a read-only command prints its document: sorted JSON for tools, lines for people."""

from __future__ import annotations

import json
from typing import Any

import pytest

from repro_gate.cli.output import print_document

DOCUMENT = {"zeta": 1, "alpha": {"b": [1, 2], "a": None}}


def describe(document: dict[str, Any]) -> list[str]:
    return [f"{key}: {value}" for key, value in document.items()]


def test_json_is_sorted_indented_and_ends_with_a_newline(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_document(DOCUMENT, True, describe)

    out = capsys.readouterr().out
    assert json.loads(out) == DOCUMENT
    assert out == json.dumps(DOCUMENT, indent=2, sort_keys=True) + "\n"
    assert out.index('"alpha"') < out.index('"zeta"')


def test_lines_are_what_describe_gives_one_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    print_document(DOCUMENT, False, describe)

    assert capsys.readouterr().out.splitlines() == ["zeta: 1",
                                                    "alpha: {'b': [1, 2], 'a': None}"]


def test_no_lines_print_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    print_document(DOCUMENT, False, lambda document: [])

    assert capsys.readouterr().out == ""


def test_a_line_naming_a_file_shows_its_control_characters_as_escapes(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_document({"data": "shards/x\n::notice::PASS\x1b[0m"}, False, describe)

    assert capsys.readouterr().out == "data: shards/x\\n::notice::PASS\\x1b[0m\n"
