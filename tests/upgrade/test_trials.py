"""The culprit search's trials: how a comparison with the baseline becomes same, within the
tolerance or changed; where the losses leave the tolerance; and trials that cannot run."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from repro_gate.compare.status import Numerics
from repro_gate.config import Config, ToleranceConfig
from repro_gate.environments import Environment, Lock, LockedPackage
from repro_gate.errors import ErrorKind, GateError
from repro_gate.gate.training_run import RunRecord
from repro_gate.launch.local import LocalLauncher
from repro_gate.upgrade import Outcome
from repro_gate.upgrade.trials import (
    Trials,
    built,
    first_loss_outside,
    installed_so_far,
    numerics_status,
    side,
)

BITWISE = ToleranceConfig()
LOOSE = ToleranceConfig(bitwise=False, atol=0.01)
DIVERGENCE = {"step": 2, "parameters": ["fc.weight"], "runs": ["A", "B"], "cause": "unknown"}


def comparison(basis: str = "bitwise", status: str = "equal",
               divergence: dict[str, Any] | None = None) -> dict[str, Any]:
    artifact = {"path": "model.pt", "kind": "checkpoint", "status": status}
    return {"basis": basis, "artifacts": [artifact],
            "trajectory": {"steps_compared": 4}, "first_divergence": divergence}


def record(name: str, losses: list[Any], run_dir: Path = Path("/runs/A")) -> RunRecord:
    trajectory = [{"step": step, "loss": loss} for step, loss in enumerate(losses)]
    return RunRecord(name, "deterministic", "local", run_dir, run_dir / "log", 0, 1.0, False,
                     None, trajectory, [], None, None, [], [])


def hexes(*values: float) -> list[str]:
    return [value.hex() for value in values]


def test_the_numerics_are_the_same_only_when_nothing_differs() -> None:
    assert numerics_status(comparison(), BITWISE, None) == Numerics.SAME
    assert numerics_status(comparison(divergence=DIVERGENCE), BITWISE, None) == (
        Numerics.CHANGED)
    assert numerics_status(comparison(status="different"), BITWISE, None) == Numerics.CHANGED


def test_under_a_tolerance_artifacts_and_losses_decide() -> None:
    assert numerics_status(comparison("tolerance", divergence=DIVERGENCE), LOOSE, None) == (
        Numerics.WITHIN_TOLERANCE)
    assert numerics_status(comparison("tolerance", "within_tolerance"), LOOSE, None) == (
        Numerics.WITHIN_TOLERANCE)
    assert numerics_status(comparison("tolerance"), LOOSE, 3) == Numerics.CHANGED


def test_the_first_loss_outside_the_tolerance_is_found() -> None:
    baseline = side(record("A", hexes(1.0, 0.9, 0.8, 0.7)), "baseline")
    near = side(record("A", hexes(1.0, 0.905, 0.8, 0.7)), "candidate")
    far = side(record("A", hexes(1.0, 0.905, 0.9, 0.0)), "candidate")

    assert (baseline.name, near.name) == ("baseline", "candidate")
    assert first_loss_outside(baseline, near, LOOSE) is None
    assert first_loss_outside(baseline, far, LOOSE) == 2
    assert first_loss_outside(baseline, far, BITWISE) is None  # the trajectory decides there


def test_losses_that_are_missing_unreadable_or_both_nan_do_not_count() -> None:
    baseline = side(record("A", [*hexes(1.0, float("nan")), "not hex", None]), "baseline")
    other = side(record("A", [*hexes(1.0, float("nan")), "0x1p+8", 5.0]), "candidate")

    assert first_loss_outside(baseline, other, LOOSE) is None


def test_the_build_progress_counts_packages_and_bytes(tmp_path: Path) -> None:
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    for name in ("numpy-2.0.1.dist-info", "rich-13.7.1.dist-info"):
        (site / name).mkdir(parents=True)
    (site / "numpy.so").write_bytes(b"\0" * 1_500_000)

    assert installed_so_far(tmp_path) == "2 packages installed, 1.5 MB"
    (site / "rich-13.7.1.dist-info").rmdir()
    assert installed_so_far(tmp_path).startswith("1 package installed, ")
    assert installed_so_far(tmp_path / "missing") == "0 packages installed, 0.0 MB"


class Builds:
    """A BuildEnvironment that answers every request with an error, and keeps the requests."""

    def __init__(self, error: GateError) -> None:
        self.error = error
        self.asked: list[dict[str, str]] = []

    def __call__(self, pins: Mapping[str, str]) -> Environment:
        self.asked.append(dict(pins))
        raise self.error


def trials(tmp_path: Path, build: Builds, sinks: list[str]) -> Trials:
    def lock(**versions: str) -> Lock:
        return Lock(tmp_path / "uv.lock", "uv.lock", "0" * 64,
                    {n: LockedPackage(n, v, True) for n, v in versions.items()})

    def sink_for(name: str) -> Any:
        sinks.append(name)
        return lambda line: None

    return Trials(Config(workdir=tmp_path, output_dir=tmp_path / "out"), LocalLauncher(), build,
                  lock(numpy="1.26.4", rich="13.7.0"), lock(numpy="2.0.1", rich="13.7.1"),
                  record("A", []), BITWISE, sink_for)


def test_a_trial_whose_environment_does_not_resolve_is_skipped(tmp_path: Path) -> None:
    build = Builds(GateError("the pins do not resolve: numpy 2 needs python 3.12",
                             kind=ErrorKind.LOCK_UNRESOLVABLE))
    sinks: list[str] = []
    search = trials(tmp_path, build, sinks)

    assert search(("numpy",)) == Outcome.SKIP
    assert search(("rich",)) == Outcome.SKIP

    assert build.asked == [{"numpy": "2.0.1", "rich": "13.7.0"},
                           {"numpy": "1.26.4", "rich": "13.7.1"}]
    assert sinks == ["T1 environment", "T2 environment"]
    assert [trial.note for trial in search.done] == [
        "the pins do not resolve: numpy 2 needs python 3.12"] * 2


def test_an_unreachable_index_ends_the_search(tmp_path: Path) -> None:
    build = Builds(GateError("the package index cannot be reached",
                             kind=ErrorKind.INDEX_UNREACHABLE))
    search = trials(tmp_path, build, [])

    with pytest.raises(GateError, match="cannot be reached"):
        search(("numpy",))
    assert search.done == []


def test_a_cached_environment_is_returned_as_built() -> None:
    environment = Environment(Path("/env/bin/python"), "0" * 64, {"numpy": "2.0.1"}, True,
                              Path("/env"))

    def cached(pins: Mapping[str, str]) -> Environment:
        assert dict(pins) == {"numpy": "2.0.1"}
        return environment

    assert built(cached, {"numpy": "2.0.1"}, "the environment of run T1",
                 lambda line: None) is environment
