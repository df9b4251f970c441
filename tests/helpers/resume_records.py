"""The resume check's records as the probe writes them: a step's state record
(`resume_state.jsonl`) and a trajectory step, each with a digest per step that a test can change."""

from __future__ import annotations

from typing import Any

from repro_gate.compare.missing_state import GENERATORS


def state(step: int, **changes: Any) -> dict[str, Any]:
    """The state a step begins with; `changes` replace fields (a generator's name its digest)."""
    record: dict[str, Any] = {
        "step": step, "params": f"p{step}", "buffers": f"b{step}",
        "rng": {"torch": f"t{step}", "cuda": None, "numpy": f"n{step}", "random": f"r{step}"},
        "optimizer_state": f"o{step}", "hyper": [{"lr": 0.1, "momentum": 0.9}],
        "grad_scale": None,
    }
    for key, value in changes.items():
        if key in GENERATORS:
            record["rng"] = {**record["rng"], key: value}
        else:
            record[key] = value
    return record


def step(n: int, inputs: str = "x", loss: float = 1.0) -> dict[str, Any]:
    """A trajectory step with its inputs' digest."""
    return {"step": n, "params": {"w": f"w{n}"}, "loss": loss, "inputs": f"{inputs}{n}",
            "grads": {"w": f"g{n}"}, "init": {"w": "w0"}}
