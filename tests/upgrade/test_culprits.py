"""The culprit search (delta debugging) on constructed oracles: the groups it names, the trials
it takes and how many, the bound, skips and max_runs."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from repro_gate.upgrade import Outcome, Search, Trial, find_culprits

Oracle = Callable[[tuple[str, ...]], Outcome]


class Recorder:
    """An oracle that keeps every subset it was asked about, and refuses the preconditions."""

    def __init__(self, names: list[str], oracle: Oracle) -> None:
        self.names = names
        self.oracle = oracle
        self.asked: list[tuple[str, ...]] = []

    def __call__(self, packages: tuple[str, ...]) -> Outcome:
        assert packages, "the empty set is a precondition: never asked"
        assert set(packages) != set(self.names), "the full set is a precondition: never asked"
        assert len(set(packages)) == len(packages)
        self.asked.append(packages)
        return self.oracle(packages)


def names_of(count: int) -> list[str]:
    return [f"pkg{index:02d}" for index in range(count)]


def changed_when(*needed: frozenset[str]) -> Oracle:
    """CHANGED when the subset holds every package of one of the `needed` sets."""
    return lambda packages: (Outcome.CHANGED if any(group <= set(packages) for group in needed)
                             else Outcome.SAME)


def search(names: list[str], oracle: Oracle, max_runs: int = 100) -> tuple[Search, Recorder]:
    recorder = Recorder(names, oracle)
    return find_culprits(names, recorder, max_runs), recorder


def assert_consistent(result: Search, recorder: Recorder) -> None:
    """The trials are the oracle's answers, in order, and no subset was asked twice."""
    assert [trial.packages for trial in result.trials] == recorder.asked
    assert [trial.outcome for trial in result.trials] == [recorder.oracle(p)
                                                          for p in recorder.asked]
    assert len({frozenset(packages) for packages in recorder.asked}) == len(recorder.asked)


@pytest.mark.parametrize("count", range(1, 65))
def test_one_culprit_among_n_is_found_alone_within_the_bound(count: int) -> None:
    names = names_of(count)
    bound = 2 * math.log2(count) + 3
    for culprit in names:
        result, recorder = search(names, changed_when(frozenset({culprit})))
        assert (result.groups, result.complete) == (((culprit,),), True)
        assert len(result.trials) <= bound, (culprit, len(result.trials))
        assert_consistent(result, recorder)


def test_the_trials_of_a_search_are_the_halvings_then_the_rest() -> None:
    names = names_of(8)
    result, _ = search(names, changed_when(frozenset({"pkg05"})))
    assert result.trials == (
        Trial(("pkg00", "pkg01", "pkg02", "pkg03"), Outcome.SAME),
        Trial(("pkg04", "pkg05", "pkg06", "pkg07"), Outcome.CHANGED),
        Trial(("pkg04", "pkg05"), Outcome.CHANGED),
        Trial(("pkg04",), Outcome.SAME),
        Trial(("pkg05",), Outcome.CHANGED),
        Trial(("pkg00", "pkg01", "pkg02", "pkg03", "pkg04", "pkg06", "pkg07"), Outcome.SAME),
    )


def test_a_single_package_needs_no_run() -> None:
    result, recorder = search(["torch"], changed_when(frozenset({"torch"})))
    assert (result.groups, result.trials, result.complete) == ((("torch",),), (), True)
    assert recorder.asked == []


def test_an_interacting_pair_is_one_group() -> None:
    names = names_of(8)
    result, recorder = search(names, changed_when(frozenset({"pkg02", "pkg05"})))
    assert (result.groups, result.complete) == ((("pkg02", "pkg05"),), True)
    # each alone was seen to change nothing: the pair is 1-minimal
    outcomes = {trial.packages: trial.outcome for trial in result.trials}
    assert outcomes[("pkg02",)] is Outcome.SAME
    assert outcomes[("pkg05",)] is Outcome.SAME
    assert len(result.trials) == 17
    assert_consistent(result, recorder)


def test_two_independent_culprits_are_two_groups() -> None:
    names = names_of(16)
    result, recorder = search(names, changed_when(frozenset({"pkg03"}), frozenset({"pkg12"})))
    assert (result.groups, result.complete) == ((("pkg03",), ("pkg12",)), True)
    rest = tuple(name for name in names if name not in ("pkg03", "pkg12"))
    assert result.trials[-1] == Trial(rest, Outcome.SAME)  # nothing else changes the numerics
    assert len(result.trials) == 14
    assert_consistent(result, recorder)


def test_a_culprit_and_an_interacting_pair() -> None:
    names = names_of(12)
    oracle = changed_when(frozenset({"pkg10"}), frozenset({"pkg01", "pkg04"}))
    result, recorder = search(names, oracle)
    assert (set(result.groups), result.complete) == ({("pkg10",), ("pkg01", "pkg04")}, True)
    assert_consistent(result, recorder)


def test_a_skip_next_to_the_culprit_is_searched_around() -> None:
    """pkg03 does not install without pkg04's new version: such subsets are SKIP."""
    names = names_of(8)

    def oracle(packages: tuple[str, ...]) -> Outcome:
        if "pkg03" in packages and "pkg04" not in packages:
            return Outcome.SKIP
        return changed_when(frozenset({"pkg02"}))(packages)

    result, recorder = search(names, oracle)
    assert (result.groups, result.complete) == ((("pkg02",),), True)
    skipped = [trial.packages for trial in result.trials if trial.outcome is Outcome.SKIP]
    assert skipped == [("pkg00", "pkg01", "pkg02", "pkg03"), ("pkg02", "pkg03"),
                       ("pkg02", "pkg03", "pkg06", "pkg07")]
    assert len(result.trials) == 11  # the skips cost the halving: finer granularity instead
    assert_consistent(result, recorder)


def test_a_culprit_that_only_installs_with_another_change_is_undecided() -> None:
    """pkg02 changes the numerics but installs only with pkg03 (alone: SKIP): the pair is the
    smallest set seen to change them, and the search says it may not be minimal."""
    names = names_of(6)

    def oracle(packages: tuple[str, ...]) -> Outcome:
        if "pkg02" in packages and "pkg03" not in packages:
            return Outcome.SKIP
        return changed_when(frozenset({"pkg02"}))(packages)

    result, recorder = search(names, oracle)
    assert (result.groups, result.complete) == ((("pkg02", "pkg03"),), False)
    outcomes = {trial.packages: trial.outcome for trial in result.trials}
    assert (outcomes[("pkg02",)], outcomes[("pkg03",)]) == (Outcome.SKIP, Outcome.SAME)
    assert_consistent(result, recorder)


def test_a_rest_that_does_not_install_leaves_the_search_incomplete() -> None:
    names = names_of(4)

    def oracle(packages: tuple[str, ...]) -> Outcome:
        if set(packages) == {"pkg00", "pkg01", "pkg02"}:
            return Outcome.SKIP
        return changed_when(frozenset({"pkg03"}))(packages)

    result, recorder = search(names, oracle)
    assert (result.groups, result.complete) == ((("pkg03",),), False)
    assert result.trials[-1] == Trial(("pkg00", "pkg01", "pkg02"), Outcome.SKIP)
    assert_consistent(result, recorder)


@pytest.mark.parametrize("max_runs", [0, 1, 3, 5])
def test_max_runs_stops_the_search_incomplete(max_runs: int) -> None:
    names = names_of(32)
    result, recorder = search(names, changed_when(frozenset({"pkg29"})), max_runs=max_runs)
    assert result.complete is False
    assert len(result.trials) == max_runs == len(recorder.asked)
    # the last group is the smallest set seen to change the numerics, and holds the culprit
    (group,) = result.groups
    changed = [t.packages for t in result.trials if t.outcome is Outcome.CHANGED]
    assert group == (changed[-1] if changed else tuple(names))
    assert "pkg29" in group
    assert_consistent(result, recorder)


def test_max_runs_reached_while_looking_for_another_culprit() -> None:
    names = names_of(4)
    full, _ = search(names, changed_when(frozenset({"pkg00"}), frozenset({"pkg03"})))
    assert full.groups == (("pkg00",), ("pkg03",))
    cut, _ = search(names, changed_when(frozenset({"pkg00"}), frozenset({"pkg03"})),
                    max_runs=len(full.trials) - 1)
    assert cut.complete is False
    assert cut.trials == full.trials[:-1]


def test_no_subset_is_asked_twice_under_many_skips() -> None:
    names = names_of(20)

    def oracle(packages: tuple[str, ...]) -> Outcome:
        if len(packages) % 3 == 0:
            return Outcome.SKIP
        return changed_when(frozenset({"pkg07", "pkg13"}), frozenset({"pkg18"}))(packages)

    result, recorder = search(names, oracle, max_runs=500)
    assert_consistent(result, recorder)
    assert len(result.trials) < 500
    assert ("pkg18",) in result.groups


@pytest.mark.parametrize(("names", "max_runs", "message"), [
    ([], 5, "at least one changed package"),
    (["a", "a"], 5, "got a package twice"),
    (["a", "b"], -1, "max_runs must be 0 or more"),
])
def test_bad_arguments_are_one_line_errors(names: list[str], max_runs: int,
                                           message: str) -> None:
    with pytest.raises(ValueError, match=message):
        find_culprits(names, changed_when(frozenset({"a"})), max_runs)
