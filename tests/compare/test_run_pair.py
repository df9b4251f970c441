"""Comparing deterministic runs: the first run against every other one, trajectories rank by rank
and artifacts path by path (files, digests from a manifest, a run stopped early)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from repro_gate.compare.run_pair import (
    RunSide,
    check_something_compared,
    compare_runs,
    empty_comparison,
)
from repro_gate.config import CompareConfig, ToleranceConfig
from repro_gate.errors import ErrorKind, GateError

BITWISE = ToleranceConfig()


def steps(*digests: str) -> list[dict[str, Any]]:
    return [{"step": n, "loss": "0x1p+0", "params": {"w": d}} for n, d in enumerate(digests, 1)]


def write(tmp_path: Path, run: str, rel: str, text: str) -> Path:
    path = tmp_path / run / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_a_side_s_trajectories_are_rank_0_s_and_the_other_ranks() -> None:
    assert RunSide("A", steps("a"), {}).trajectories() == {0: steps("a")}
    both = RunSide("A", steps("a"), {}, other_ranks={1: steps("b")})
    assert both.trajectories() == {0: steps("a"), 1: steps("b")}
    # Rank 0 recorded nothing but another rank did: only the ranks that stepped.
    assert RunSide("A", [], {}, other_ranks={1: steps("b")}).trajectories() == {1: steps("b")}
    assert RunSide("A", [], {}).trajectories() == {0: []}


def test_a_side_s_paths_are_its_files_and_its_digests() -> None:
    side = RunSide("A", [], {"m.json": Path("/x/m.json")}, digests={"model.pt": "ab"})
    assert side.paths() == {"m.json", "model.pt"}


def test_fewer_than_two_runs_compare_nothing() -> None:
    assert compare_runs([RunSide("A", steps("a"), {})], BITWISE) == empty_comparison(BITWISE)
    assert empty_comparison(ToleranceConfig.from_document({"atol": 1.0}))["basis"] == (
        "tolerance")


def test_the_first_run_is_compared_with_each_other_and_the_earliest_divergence_wins() -> None:
    a = RunSide("det-1", steps("a", "b", "c"), {})
    b = RunSide("det-2", steps("a", "b", "x"), {})
    c = RunSide("det-3", steps("a", "y", "z"), {})
    comparison = compare_runs([a, b, c], BITWISE)
    trajectory = comparison["trajectory"]
    assert (trajectory["status"], trajectory["steps_compared"]) == ("different", 2)
    assert trajectory["steps"] == {"det-1": 3, "det-2": 3, "det-3": 3}
    assert "ranks" not in trajectory
    divergence = comparison["first_divergence"]
    assert divergence is not None
    assert (divergence["step"], divergence["runs"]) == (2, ["det-1", "det-3"])


def test_runs_of_several_ranks_say_how_many() -> None:
    a = RunSide("A", steps("a"), {}, other_ranks={1: steps("a")})
    b = RunSide("B", steps("a"), {}, other_ranks={1: steps("a")})
    trajectory = compare_runs([a, b], BITWISE)["trajectory"]
    assert (trajectory["status"], trajectory["ranks"]) == ("equal", 2)


def test_artifacts_are_compared_by_path_and_one_sided_ones_named(tmp_path: Path) -> None:
    a = RunSide("A", [], {"m.json": write(tmp_path, "a", "m.json", '{"loss": 1.0}'),
                          "only_a.txt": write(tmp_path, "a", "only_a.txt", "x")})
    b = RunSide("B", [], {"m.json": write(tmp_path, "b", "m.json", '{"loss": 1.0005}'),
                          "only_b.txt": write(tmp_path, "b", "only_b.txt", "y")})
    tolerance = ToleranceConfig.from_document({"atol": 1e-3})
    artifacts = compare_runs([a, b], tolerance)["artifacts"]
    assert [(item["path"], item["status"], item["runs"]) for item in artifacts] == [
        ("m.json", "within_tolerance", ["A", "B"]),
        ("only_a.txt", "missing_in_b", ["A", "B"]),
        ("only_b.txt", "missing_in_a", ["A", "B"])]
    assert artifacts[0]["tolerance"] == {"atol": 1e-3, "rtol": 0.0}


def test_ignored_fields_reach_the_artifact_comparison(tmp_path: Path) -> None:
    a = RunSide("A", [], {"m.json": write(tmp_path, "a", "m.json", '{"loss": 1, "t": 5}')})
    b = RunSide("B", [], {"m.json": write(tmp_path, "b", "m.json", '{"loss": 1, "t": 9}')})
    policy = CompareConfig.from_document({"ignore": [{"glob": "m.json", "fields": ["t"]}]})
    assert compare_runs([a, b], BITWISE)["artifacts"][0]["status"] == "different"
    assert compare_runs([a, b], BITWISE, policy)["artifacts"][0]["status"] == "equal"


def test_a_file_known_only_by_its_digest_is_compared_by_sha256(tmp_path: Path) -> None:
    path = write(tmp_path, "a", "model.pt", "weights")
    digest = hashlib.sha256(b"weights").hexdigest()
    a = RunSide("A", [], {"model.pt": path})
    b = RunSide("B", [], {}, digests={"model.pt": digest},
                notes={"model.pt": "run B's file is gone"})
    (item,) = compare_runs([a, b], BITWISE)["artifacts"]
    assert (item["status"], item["sha256_a"], item["sha256_b"]) == ("equal", digest, digest)
    assert item["note"].startswith("compared by sha256 from a manifest")
    assert item["note"].endswith("; run B's file is gone")
    other = RunSide("B", [], {}, digests={"model.pt": "0" * 64})
    assert compare_runs([a, other], BITWISE)["artifacts"][0]["status"] == "different"


def test_a_run_stopped_early_has_its_artifacts_not_compared(tmp_path: Path) -> None:
    a = RunSide("A", steps("a", "b"), {"m.json": write(tmp_path, "a", "m.json", "{}")})
    b = RunSide("B", steps("a", "x"), {}, stopped="first divergent step")
    (item,) = compare_runs([a, b], BITWISE)["artifacts"]
    assert (item["path"], item["status"]) == ("m.json", "not_compared")
    assert "run B was stopped at its first divergent step" in item["note"]


def test_comparing_neither_steps_nor_files_is_an_error() -> None:
    with pytest.raises(GateError, match="nothing to compare") as error:
        check_something_compared(compare_runs([RunSide("A", [], {}), RunSide("B", [], {})],
                                              BITWISE))
    assert error.value.kind == ErrorKind.NOTHING_TO_COMPARE
    check_something_compared(compare_runs([RunSide("A", steps("a"), {}),
                                           RunSide("B", steps("a"), {})], BITWISE))
