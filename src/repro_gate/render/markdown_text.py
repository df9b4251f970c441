"""Small text pieces of the Markdown report: table cells, single lines, numbers, manifest fields.

The manifest is read tolerantly here: a field of the wrong type reads as empty, never raises.
Names come from the training (artifacts, tensors, ops): their control characters are shown as
escapes, so none can break a line, a table row or the Markdown around it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from repro_gate.compare.structured import is_number
from repro_gate.errors import printable

TABLE_ROWS = 30  # rows a table shows before "…and N more"


def more_text(total: int, noun: str) -> str:
    """`…and N more <noun>.` under a table cut to TABLE_ROWS rows; empty when none were cut."""
    more = total - TABLE_ROWS
    return f"\n\n…and {more} more {noun}." if more > 0 else ""


def parameters_text(parameters: Any, limit: int) -> str:
    """Up to `limit` parameter names, then `+N more`; empty without names."""
    names = [printable(str(p)) for p in as_list(parameters)]
    if not names:
        return ""
    shown = ", ".join(names[:limit])
    return shown + (f" +{len(names) - limit} more" if len(names) > limit else "")


def multi_rank(comparison: Mapping[str, Any]) -> bool:
    """True when the trajectories of more than one rank were compared."""
    ranks = as_mapping(comparison.get("trajectory")).get("ranks")
    return is_number(ranks) and ranks > 1


def rank_text(comparison: Mapping[str, Any]) -> str:
    """` on rank 1` for the first divergence of a multi-rank run; empty otherwise."""
    rank = as_mapping(comparison.get("first_divergence")).get("rank")
    return f" on rank {rank}" if multi_rank(comparison) and is_number(rank) else ""


def short(value: Any, limit: int = 80) -> str:
    """`value` as text of at most `limit` characters; `n/a` for None."""
    text = "n/a" if value is None else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def seconds(value: Any) -> str:
    """`1.234 s` for a number, empty otherwise."""
    return f"{value:.4g} s" if is_number(value) else ""


def number_text(value: Any) -> str:
    """A number with three significant digits, empty otherwise."""
    return f"{value:.3g}" if is_number(value) else ""


def cell(value: Any) -> str:
    """Text safe inside a Markdown table cell."""
    return one_line(str(value)).replace("|", "\\|")


def one_line(text: str, limit: int = 200) -> str:
    """`text` on one line, whitespace collapsed, other control characters escaped, cut to
    `limit` characters."""
    line = printable(" ".join(text.split()))
    return line if len(line) <= limit else line[: limit - 1] + "…"


def as_mapping(value: Any) -> Mapping[str, Any]:
    """`value` when it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def as_list(value: Any) -> list[Any]:
    """`value` when it is a list, else an empty one."""
    return value if isinstance(value, list) else []
