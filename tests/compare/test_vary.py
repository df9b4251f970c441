"""A run that varies one factor of the environment against run A, as run B is compared: where
the trajectory first parts and why, the artifacts' differing tensors and key paths."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from repro_gate.compare.run_pair import RunSide
from repro_gate.compare.vary import compare_vary, error, not_run
from repro_gate.config import CompareConfig, ToleranceConfig

BITWISE = ToleranceConfig()


def steps(*digests: str) -> list[dict[str, Any]]:
    return [{"step": n, "loss": "0x1p+0", "params": {"w": d}} for n, d in enumerate(digests, 1)]


def hparams(tmp_path: Path, run: str, data_dir: str) -> dict[str, Path]:
    path = tmp_path / run / "hparams.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"hparams": {"data_dir": data_dir, "lr": 0.1}}))
    return {"hparams.json": path}


def test_equal_runs_are_the_same(tmp_path: Path) -> None:
    a = RunSide("A", steps("a", "b"), hparams(tmp_path, "A", "/w/data"))
    v = RunSide("V-threads", steps("a", "b"), hparams(tmp_path, "V", "/w/data"))

    result = compare_vary("threads", {"A": 2, "V": 1}, a, v, BITWISE, CompareConfig())

    assert result == {"factor": "threads", "status": "same", "values": {"A": 2, "V": 1},
                      "first_divergence": None, "artifacts": [], "note": ""}


def test_a_value_that_differs_is_named_by_its_key_path(tmp_path: Path) -> None:
    a = RunSide("A", steps("a", "b"), hparams(tmp_path, "A", "/w/data"))
    v = RunSide("V-path", steps("a", "b"), hparams(tmp_path, "V", "/w/out/moved/w/data"))

    result = compare_vary("path", {"A": "/w", "V": "/w/out/moved/w"}, a, v, BITWISE,
                          CompareConfig())

    assert result["status"] == "changed"
    assert result["first_divergence"] is None
    assert result["artifacts"] == [{"path": "hparams.json", "status": "different",
                                    "tensors": [], "keys": ["hparams.data_dir"]}]


def test_a_trajectory_that_parts_gives_its_step(tmp_path: Path) -> None:
    a = RunSide("A", steps("a", "b", "c"), {})
    v = RunSide("V-time", steps("a", "x"), {}, stopped="divergence")

    result = compare_vary("time", {"A": "2026-11-28", "V": "2028-01-02"}, a, v, BITWISE,
                          CompareConfig())

    assert result["status"] == "changed"
    assert result["first_divergence"] == {"step": 2, "cause": "unknown", "parameters": ["w"]}


def test_not_run_and_error_carry_their_reason_and_never_a_comparison() -> None:
    assert not_run("hostname", "no namespaces") == {
        "factor": "hostname", "status": "not_run", "values": {}, "first_divergence": None,
        "artifacts": [], "note": "no namespaces"}
    assert error("threads", "run V-threads exited with code 1", {"A": 2, "V": 1})["status"] == (
        "error")
