"""Which state a resume did not restore, from the state records of runs A and R as the probe
writes them (`resume_state.jsonl`) and the input digests of their trajectories."""

from __future__ import annotations

from typing import Any

import pytest
from helpers.resume_records import state, step

from repro_gate.compare.missing_state import GENERATORS, PRECEDENCE, SENTENCES, decide, sentence


def test_the_first_state_in_precedence_at_the_first_differing_step_is_named() -> None:
    a = {0: [state(n) for n in range(1, 6)]}
    # At step 3 the torch generator, the learning rate and the moments differ: rng wins.
    r = {0: [state(1), state(2), state(3, torch="other", hyper=[{"lr": 1.0}], optimizer_state="o"),
             state(4, params="other")]}
    assert decide(a, r, {}, {}, resume_step=2) == {"kind": "rng", "generator": "torch"}


@pytest.mark.parametrize(("changes", "kind", "generator"), [
    ({"params": "other"}, "parameters", None),
    ({"buffers": "fresh"}, "buffers", None),
    ({"numpy": "reseeded"}, "rng", "numpy"),
    ({"random": "reseeded"}, "rng", "random"),
    ({"hyper": [{"lr": 0.5, "momentum": 0.9}]}, "lr_schedule", None),
    ({"grad_scale": 65536.0}, "grad_scaler", None),
    ({"optimizer_state": None}, "optimizer_state", None),
])
def test_each_state_alone_is_named(changes: dict[str, Any], kind: str,
                                   generator: str | None) -> None:
    a = {0: [state(n) for n in range(1, 5)]}
    r = {0: [state(1), state(2), state(3, **changes), state(4, **changes)]}
    missing = decide(a, r, {}, {}, resume_step=2)
    assert missing == {"kind": kind, "generator": generator}
    assert "not restored" in sentence(missing)


def test_other_batches_after_the_resume_are_the_data_order() -> None:
    states = {0: [state(n) for n in range(1, 5)]}
    a = {0: [step(n) for n in range(1, 5)]}
    r = {0: [step(1), step(2), step(3, inputs="y"), step(4, inputs="y")]}
    assert decide(states, states, a, r, resume_step=2) == {"kind": "data_order",
                                                           "generator": None}


def test_a_difference_before_the_resume_point_or_on_another_rank_counts_from_the_resume() -> None:
    a = {0: [state(n) for n in range(1, 5)], 1: [state(n) for n in range(1, 5)]}
    r = {0: [state(1, params="x"), state(2), state(3), state(4)],
         1: [state(1), state(2), state(3), state(4, optimizer_state="fresh")]}
    assert decide(a, r, {}, {}, resume_step=2) == {"kind": "optimizer_state", "generator": None}


def test_a_state_that_differed_before_the_resume_too_is_not_the_resume_s_doing() -> None:
    # `random` is never seeded: its state differs between any two processes, unused.
    a = {0: [state(n) for n in range(1, 5)]}
    r = {0: [state(1, random="own"), state(2, random="own"), state(3, random="own"),
             state(4, random="own", hyper=[{"lr": 1.0}])]}
    assert decide(a, r, {}, {}, resume_step=2) == {"kind": "lr_schedule", "generator": None}


def test_nothing_recorded_differs_is_unknown() -> None:
    a = {0: [state(n) for n in range(1, 5)]}
    assert decide(a, a, {}, {}, resume_step=2) == {"kind": "unknown", "generator": None}
    assert decide(a, {}, {}, {}, resume_step=2)["kind"] == "unknown"


def test_every_kind_and_generator_has_its_sentence() -> None:
    kinds = ["parameters", "buffers", "data_order", "lr_schedule", "grad_scaler",
             "optimizer_state", "unknown"]
    for kind in kinds:
        assert sentence({"kind": kind, "generator": None}) == SENTENCES[kind]
    for generator in GENERATORS:
        assert generator.replace("random", "Python's random") in sentence(
            {"kind": "rng", "generator": generator}).replace("CUDA", "cuda")


def test_among_generators_torch_comes_first_then_cuda_numpy_random() -> None:
    a = {0: [state(n) for n in range(1, 4)]}
    r = {0: [state(1), state(2), state(3, random="r", numpy="n", cuda="c")]}
    assert decide(a, r, {}, {}, resume_step=2) == {"kind": "rng", "generator": "cuda"}
    r = {0: [state(1), state(2), state(3, random="r", numpy="n")]}
    assert decide(a, r, {}, {}, resume_step=2)["generator"] == "numpy"


def test_the_first_differing_step_decides_even_when_a_later_one_differs_more() -> None:
    a = {0: [state(n) for n in range(1, 6)]}
    r = {0: [state(1), state(2), state(3), state(4, grad_scale=2.0),
             state(5, params="x", grad_scale=2.0)]}
    assert decide(a, r, {}, {}, resume_step=2) == {"kind": "grad_scaler", "generator": None}


def test_a_step_recorded_twice_keeps_its_last_record() -> None:
    # Run R's first process recorded step 3 before it stopped; the resumed one, again.
    a = {0: [state(n) for n in range(1, 4)]}
    r = {0: [state(1), state(2), state(3, params="stale"), state(3, buffers="fresh")]}
    assert decide(a, r, {}, {}, resume_step=2) == {"kind": "buffers", "generator": None}


def test_precedence_is_the_order_of_a_training_step_s_state() -> None:
    assert [str(kind) for kind in PRECEDENCE] == [
        "parameters", "buffers", "rng", "data_order", "lr_schedule", "grad_scaler",
        "optimizer_state", "unknown"]
