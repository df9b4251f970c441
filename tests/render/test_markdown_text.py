"""The small text pieces of the Markdown report: cells, lines, numbers, tolerant field reads."""

from __future__ import annotations

from typing import Any

import pytest

from repro_gate.render.markdown_text import (
    TABLE_ROWS,
    as_list,
    as_mapping,
    cell,
    more_text,
    multi_rank,
    number_text,
    one_line,
    parameters_text,
    rank_text,
    seconds,
    short,
)


def test_a_table_cut_to_its_rows_says_how_many_more() -> None:
    assert more_text(TABLE_ROWS, "ops") == ""
    assert more_text(TABLE_ROWS + 4, "ops") == "\n\n…and 4 more ops."


def test_parameters_past_the_limit_become_a_count() -> None:
    names = ["fc.weight", "fc.bias", "head.weight"]
    assert parameters_text(names, limit=2) == "fc.weight, fc.bias +1 more"
    assert parameters_text(names, limit=3) == "fc.weight, fc.bias, head.weight"
    assert parameters_text("fc.weight", limit=3) == ""  # not a list: no names
    assert parameters_text(["fc\n## PASS", "b"], limit=1) == "fc\\n## PASS +1 more"


def test_the_rank_is_named_only_when_several_ranks_were_compared() -> None:
    two = {"trajectory": {"ranks": 2}, "first_divergence": {"rank": 1}}
    one = {"trajectory": {"ranks": 1}, "first_divergence": {"rank": 0}}
    assert multi_rank(two) and not multi_rank(one)
    assert rank_text(two) == " on rank 1"
    assert rank_text(one) == ""
    assert rank_text({"trajectory": {"ranks": 2}, "first_divergence": None}) == ""
    assert not multi_rank({"trajectory": "3 ranks"})


def test_short_text_is_cut_with_an_ellipsis() -> None:
    assert short(None) == "n/a"
    assert short("abc", limit=3) == "abc"
    cut = short("abcdef", limit=4)
    assert cut == "abc…" and len(cut) == 4


@pytest.mark.parametrize(("value", "expected"), [(1.23456, "1.235 s"), (12, "12 s"),
                                                 (None, ""), ("1.5", ""), (True, "")])
def test_seconds_only_for_numbers(value: Any, expected: str) -> None:
    assert seconds(value) == expected


def test_numbers_have_three_significant_digits() -> None:
    assert number_text(2.384185791015625e-07) == "2.38e-07"
    assert number_text(1931) == "1.93e+03"
    assert number_text("many") == ""


def test_a_cell_is_one_line_with_its_pipes_escaped() -> None:
    assert cell("a | b\nc\t d") == "a \\| b c d"
    assert cell(42) == "42"


def test_one_line_collapses_whitespace_and_cuts() -> None:
    assert one_line("  first\n\n second  ") == "first second"
    assert one_line("model\x1b[2K.pt\x00") == "model\\x1b[2K.pt\\x00"
    assert cell("a\x07|b") == "a\\x07\\|b"
    cut = one_line("x" * 300)
    assert len(cut) == 200 and cut.endswith("…")


def test_fields_of_the_wrong_type_read_as_empty() -> None:
    assert as_mapping(["a"]) == {}
    assert as_mapping({"a": 1}) == {"a": 1}
    assert as_list({"a": 1}) == []
    assert as_list([1, 2]) == [1, 2]
