"""Names spelled like a mistyped one: the "did you mean" of a config key, a command, an option,
and the files nearest an artifact glob that matched nothing."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

# How alike a known name must be to be offered (difflib's ratio, 0 to 1): `tolerence` finds
# `tolerance` (0.89) and `--artifact` finds `--artifacts` (0.95), but `bogus` finds no `gpus`
# (0.67): a guess that far off would only mislead.
CUTOFF = 0.75


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """` (did you mean 'budget'?)` when a name of `known` is spelled like `word`, else ""."""
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=CUTOFF)
    return f" (did you mean {close[0]!r}?)" if close else ""


def nearest(word: str, known: Iterable[str], count: int) -> list[str]:
    """The `count` names of `known` spelled most like `word`, the closest first (names equally
    close in their sorted order), however far off they are."""
    return sorted(known, key=lambda name: (-_likeness(word, name), name))[:count]


def _likeness(word: str, name: str) -> float:
    return difflib.SequenceMatcher(None, word, name).ratio()
