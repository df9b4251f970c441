"""The culprit search: the smallest sets of changed packages that alone change the numerics.

`find_culprits(names, test, max_runs)` is delta debugging (Zeller & Hildebrandt 2002,
"Simplifying and Isolating Failure-Inducing Input"): `ddmin` over the change set, where
`test(subset)` runs the training with only `subset` moved to the candidate's versions.

    ddmin(C), C known CHANGED, granularity g = 2:
      split C into g parts, as even as possible, in the order given;
      a part that is CHANGED becomes C (g = 2): the halving step;
      else (g > 2) a complement C - part that is CHANGED becomes C (g = g - 1);
      else, while g < |C|, double g; at g = |C| C is 1-minimal: no single package can go.

A SKIP (an environment that does not resolve or install, a run that crashes) is "unresolved"
as in the paper: the subset is neither passing nor failing, and the search goes on at a finer
granularity. When a SKIP is all that stands between C and a smaller set (some C - {x} was
SKIP), C is returned but `complete` is False: it may not be minimal.

Interacting packages (only both together change the numerics) come out as one group: each
alone is SAME, so ddmin keeps both. Independent culprits: after a group is found, the changes
outside every group found so far are tested together; CHANGED means another culprit is there,
and ddmin runs again on them.

The bound. test(all names) = CHANGED and test(()) = SAME are the preconditions (the gates
already ran both), so they are never asked, and no subset is asked twice (a cache by set).
A single culprit among n: every halving takes at most 2 runs (the first half, then the second)
and there are ceil(log2 n) of them, plus one run for the rest: at most 2*log2(n) + 3. However
the search goes, it never calls `test` more than `max_runs` times: it stops there with
`complete` False, and the last group is the smallest set known to change the numerics so far.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum


class Outcome(Enum):
    """What one trial run said, against the baseline's run."""

    SAME = "same"
    CHANGED = "changed"
    SKIP = "skip"  # the environment does not resolve or install, or the run crashed


@dataclass(frozen=True)
class Trial:
    """One call of `test`: the packages moved to the candidate's versions, and its outcome."""

    packages: tuple[str, ...]
    outcome: Outcome


@dataclass(frozen=True)
class Search:
    """The result of the culprit search."""

    # each a 1-minimal set that alone reproduces the change (an interacting pair is one group);
    # when not complete, the last is the smallest set seen to reproduce it, maybe not minimal
    groups: tuple[tuple[str, ...], ...]
    trials: tuple[Trial, ...]  # in the order run: len(trials) is the number of runs taken
    complete: bool  # False: max_runs reached, or skips left the result undecided


Test = Callable[[tuple[str, ...]], Outcome]


class _OutOfRuns(Exception):
    """max_runs trials were taken: the search stops where it is."""


def find_culprits(names: Sequence[str], test: Test, max_runs: int) -> Search:
    """The groups of `names` that alone change the numerics; `test(all names)` must be CHANGED
    and `test(())` SAME (neither is asked). Names keep the order given."""
    order = tuple(names)
    if not order:
        raise ValueError("the culprit search needs at least one changed package")
    if len(set(order)) != len(order):
        raise ValueError(f"the culprit search got a package twice: {', '.join(order)}")
    if max_runs < 0:
        raise ValueError(f"max_runs must be 0 or more, not {max_runs}")
    searcher = _Searcher(order, test, max_runs)
    groups: list[tuple[str, ...]] = []
    complete = True
    rest = order  # known CHANGED at the top of the loop
    try:
        while rest:
            try:
                complete = searcher.minimise(rest) and complete
            finally:  # out of runs too: the smallest set known to change the numerics so far
                groups.append(searcher.narrowed)
            rest = tuple(name for name in order if all(name not in g for g in groups))
            outcome = searcher.outcome(rest) if rest else Outcome.SAME
            if outcome is not Outcome.CHANGED:
                complete = complete and outcome is Outcome.SAME  # SKIP: others may hide there
                break
    except _OutOfRuns:
        complete = False
    return Search(tuple(groups), tuple(searcher.trials), complete)


class _Searcher:
    """The cache of outcomes, the trials taken, and ddmin itself."""

    def __init__(self, names: tuple[str, ...], test: Test, max_runs: int) -> None:
        self._test = test
        self._max_runs = max_runs
        self._known = {frozenset(names): Outcome.CHANGED, frozenset(): Outcome.SAME}
        self.trials: list[Trial] = []
        self.narrowed = names  # the set ddmin is narrowing: known CHANGED

    def outcome(self, subset: tuple[str, ...]) -> Outcome:
        """From the cache, or one more trial (never past max_runs)."""
        key = frozenset(subset)
        known = self._known.get(key)
        if known is not None:
            return known
        if len(self.trials) >= self._max_runs:
            raise _OutOfRuns
        result = self._test(subset)
        self._known[key] = result
        self.trials.append(Trial(subset, result))
        return result

    def minimise(self, changed: tuple[str, ...]) -> bool:
        """ddmin from `changed` down to `self.narrowed`; False when skips left it undecided."""
        self.narrowed = changed
        granularity = 2
        while len(self.narrowed) > 1:
            current = self.narrowed
            reduced = self._reduce(current, granularity)
            if reduced is not None:
                self.narrowed, granularity = reduced
            elif granularity < len(current):
                granularity = min(2 * granularity, len(current))
            else:  # 1-minimal unless removing one package was a skip (then: unknown)
                return all(self.outcome(_without(current, name)) is not Outcome.SKIP
                           for name in current)
        return True

    def _reduce(self, current: tuple[str, ...],
                granularity: int) -> tuple[tuple[str, ...], int] | None:
        """The first part that is CHANGED (then halve it), else (more than two parts) the first
        complement (then go on with one part fewer), with the next granularity."""
        parts = _split(current, granularity)
        for part in parts:
            if self.outcome(part) is Outcome.CHANGED:
                return part, 2
        if granularity > 2:  # with two parts, the complements are the parts
            for part in parts:
                complement = tuple(name for name in current if name not in part)
                if self.outcome(complement) is Outcome.CHANGED:
                    return complement, max(granularity - 1, 2)
        return None


def _split(names: tuple[str, ...], parts: int) -> list[tuple[str, ...]]:
    """`names` cut into `parts` runs of consecutive names whose sizes differ by one at most."""
    size = len(names)
    return [names[size * i // parts:size * (i + 1) // parts] for i in range(parts)]


def _without(names: tuple[str, ...], left_out: str) -> tuple[str, ...]:
    return tuple(name for name in names if name != left_out)
