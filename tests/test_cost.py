"""The cost of determinism from recorded step times."""

from __future__ import annotations

from repro_gate.gate.cost import cost_of_determinism


def steps(*times: float) -> list[dict]:
    return [{"step": i + 1, "time": t} for i, t in enumerate(times)]


def test_median_step_times_after_warmup() -> None:
    # The warm-up steps (slow first steps) are left out of both medians.
    det = steps(9.0, 9.0, 1.1, 1.1, 1.1, 1.2, 1.1, 1.1)
    default = steps(5.0, 5.0, 1.0, 1.0, 1.0, 1.0, 1.1, 1.0)
    cost = cost_of_determinism([det], default, 20.0, 19.0, warmup=2)
    assert cost["basis"] == "step_median"
    assert (cost["det_step_seconds"], cost["default_step_seconds"]) == (1.1, 1.0)
    assert cost["pct"] == 10.0
    assert cost["steps_timed"] == 6
    low, high = cost["ci95_pct"]
    assert low <= 10.0 <= high
    assert high - low < 25


def test_both_deterministic_runs_count() -> None:
    cost = cost_of_determinism([steps(2.0, 2.0), steps(4.0, 4.0)], steps(2.0, 2.0), 1, 1, warmup=0)
    assert cost["det_step_seconds"] == 3.0
    assert cost["pct"] == 50.0
    assert cost["ci95_pct"] is None  # too few steps for an interval


def test_whole_run_wall_time_when_no_steps_were_seen() -> None:
    cost = cost_of_determinism([[]], [], det_wall_seconds=12.0, default_wall_seconds=10.0, warmup=3)
    assert cost["basis"] == "wall"
    assert cost["pct"] == 20.0
    assert cost["det_step_seconds"] is None
    assert "wall times" in cost["note"]
