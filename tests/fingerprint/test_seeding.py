"""Who seeded the training and who set each determinism setting, and the lines that reproduce
the gate's settings outside it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repro_gate.config import Config
from repro_gate.fingerprint.seeding import (
    NO_RECORD_NOTE,
    reproduce_lines,
    seeding,
    settings_lines,
    unseeded_anchor,
)


def config(**values: Any) -> Config:
    return Config(workdir=Path("/w"), output_dir=Path("/w/out"), **values)


def runtime(probe: dict[str, Any]) -> dict[str, Any]:
    return {"random": {"seeding": probe}}


def test_the_settings_lines_follow_the_determinism_mode_and_the_seed() -> None:
    warn = dict(settings_lines(config()))
    strict_seeded = dict(settings_lines(config(determinism="strict", seed=7)))

    assert warn["CUBLAS_WORKSPACE_CONFIG"] == "export CUBLAS_WORKSPACE_CONFIG=:4096:8"
    assert "PYTHONHASHSEED" not in warn  # each run has its own: nothing to reproduce
    assert warn["use_deterministic_algorithms"] == (
        "torch.use_deterministic_algorithms(True, warn_only=True)")
    assert "seed_torch" not in warn
    assert strict_seeded["use_deterministic_algorithms"] == (
        "torch.use_deterministic_algorithms(True)")
    assert strict_seeded["seed_torch"] == "torch.manual_seed(7)"
    assert strict_seeded["seed_numpy"] == "numpy.random.seed(7)"


def test_without_a_probe_record_nothing_is_called_unseeded_and_the_gate_applied_all() -> None:
    record = seeding(config(), None)

    assert record["note"] == NO_RECORD_NOTE
    assert (record["training"], record["unseeded"], record["first_parameter"]) == ([], [], None)
    assert record["parameters_before_seeding"] is None
    assert all(s["applied_by_gate"] and not s["set_by_training"] for s in record["settings"])


def test_the_generators_the_training_imported_and_never_seeded_are_named() -> None:
    probe = {"calls": [{"generator": "torch", "file": "train.py", "line": 4}],
             "imported": {"torch": True, "numpy": True},
             "first_parameter": {"file": "model.py", "line": 10, "torch_seeded_before": True},
             "settings": {"cudnn_benchmark": {"training": True, "gate": True}}}

    record = seeding(config(), runtime(probe))

    assert record["unseeded"] == ["numpy", "random"]
    assert record["parameters_before_seeding"] is False
    assert "note" not in record
    benchmark = next(s for s in record["settings"] if s["name"] == "cudnn_benchmark")
    assert benchmark["set_by_training"] is True
    assert unseeded_anchor(record) is None  # torch was seeded before its first parameter


def test_an_unseeded_torch_is_anchored_at_the_first_parameter() -> None:
    probe = {"calls": [], "imported": {"torch": True, "numpy": False},
             "first_parameter": {"file": "model.py", "line": 10, "torch_seeded_before": False}}

    record = seeding(config(), runtime(probe))

    assert record["unseeded"] == ["torch", "random"]
    assert unseeded_anchor(record) == {"generators": ["torch"], "seeded_late": False,
                                       "file": "model.py", "line": 10}


def test_torch_seeded_only_after_its_first_parameter_is_seeded_late() -> None:
    probe = {"calls": [{"generator": "torch"}, {"generator": "random"}],
             "imported": {"torch": True},
             "first_parameter": {"file": "model.py", "torch_seeded_before": False}}

    anchor = unseeded_anchor(seeding(config(), runtime(probe)))

    assert anchor == {"generators": ["torch"], "seeded_late": True, "file": "model.py"}


def test_when_the_gate_seeds_nothing_is_unseeded_or_late() -> None:
    probe = {"calls": [], "imported": {"torch": True},
             "first_parameter": {"file": "model.py", "torch_seeded_before": False}}

    record = seeding(config(seed=3), runtime(probe))

    assert record["gate_seed"] == 3
    assert (record["unseeded"], record["parameters_before_seeding"]) == ([], False)
    assert unseeded_anchor(record) is None


def test_the_lines_to_reproduce_are_the_gates_settings_the_training_lacks() -> None:
    probe = {"calls": [{"generator": "torch"}], "imported": {"torch": True},
             "settings": {name: {"gate": True, "training": name == "cudnn_deterministic"}
                          for name in ("CUBLAS_WORKSPACE_CONFIG",
                                       "use_deterministic_algorithms", "cudnn_deterministic",
                                       "cudnn_benchmark")}}

    lines = reproduce_lines(seeding(config(seed=5), runtime(probe)))

    assert lines == [
        "export CUBLAS_WORKSPACE_CONFIG=:4096:8",
        "torch.use_deterministic_algorithms(True, warn_only=True)",
        "torch.backends.cudnn.benchmark = False",
        "random.seed(5)", "numpy.random.seed(5)",
    ]
    assert reproduce_lines(None) == []
