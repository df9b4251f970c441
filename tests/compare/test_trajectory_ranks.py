"""Per-rank trajectory comparison: each rank against the same rank, the evidence's rank named."""

from __future__ import annotations

import subprocess
import sys

from repro_gate import probe
from repro_gate.compare.trajectory import compare_ranks


def steps(*digests: str) -> list[dict]:
    return [{"step": i + 1, "loss": "0x1p+0", "params": {"w": d}} for i, d in enumerate(digests)]


def test_the_earliest_step_wins_over_a_lower_rank() -> None:
    a = {0: steps("a", "b", "c"), 1: steps("a", "b", "c")}
    b = {0: steps("a", "b", "x"), 1: steps("a", "x", "x")}
    result = compare_ranks(a, b, ("A", "B"))
    assert result["status"] == "different"
    assert (result["first_divergence"]["rank"], result["first_divergence"]["step"]) == (1, 2)


def test_at_equal_step_the_lowest_rank_is_named() -> None:
    a = {0: steps("a", "b"), 1: steps("a", "b"), 2: steps("a", "b")}
    b = {0: steps("a", "b"), 1: steps("a", "x"), 2: steps("a", "x")}
    divergence = compare_ranks(a, b, ("A", "B"))["first_divergence"]
    assert (divergence["rank"], divergence["step"]) == (1, 2)


def test_a_rank_missing_in_one_run_is_a_length_difference() -> None:
    result = compare_ranks({0: steps("a"), 1: steps("a")}, {0: steps("a")}, ("A", "B"))
    assert (result["status"], result["steps_compared"], result["steps"]) == (
        "length_differs", 0, {"A": 1, "B": 1})


def test_the_probe_names_rank_files_as_the_gate_reads_them() -> None:
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import _repro_gate_contract as c;"
            "print(' '.join(c.rank_file(n, r) for n in ('trajectory.jsonl', 'status.json')"
            " for r in (0, 1, 12)))")
    done = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(probe.INJECT_DIR)],
                          capture_output=True, text=True, check=True, timeout=60)
    expected = [probe.rank_file(n, r) for n in ("trajectory.jsonl", "status.json")
                for r in (0, 1, 12)]
    assert done.stdout.split() == expected
    assert expected[:3] == ["trajectory.jsonl", "trajectory-rank1.jsonl", "trajectory-rank12.jsonl"]
