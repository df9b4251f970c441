"""The tolerance rule exists once, on the gate's side (compare/tolerance.py): every comparison
of the gate (tensors, JSON numbers, the upgrade check's losses, fail-fast under a tolerance)
uses it, and it answers as documented on every edge case."""

from __future__ import annotations

import itertools
import math
import sys

import numpy as np
import pytest

from repro_gate.compare.run_pair import RunSide
from repro_gate.compare.structured import compare_numbers
from repro_gate.compare.tensors import compare_tensors
from repro_gate.compare.tolerance import Tolerance, agree
from repro_gate.config import ToleranceConfig
from repro_gate.gate.fail_fast import Reference
from repro_gate.upgrade.trials import first_loss_outside

NAN, INF = math.nan, math.inf
HUGE, TINY = sys.float_info.max, 5e-324
VALUES = [0.0, -0.0, 1.0, -1.0, 1.0 + 2**-52, 1e-3, 1.001, 1e300, -1e300, HUGE, -HUGE, TINY,
          -TINY, NAN, INF, -INF]
TOLERANCES = [(0.0, 0.0), (1e-3, 0.0), (0.0, 1e-3), (1e-3, 1e-3), (0.0, 2.0), (HUGE, 0.0)]
CASES = [(a, b, atol, rtol) for (a, b), (atol, rtol)
         in itertools.product(itertools.product(VALUES, VALUES), TOLERANCES)]


def fail_fast_allows(a: float, b: float, atol: float, rtol: float) -> bool:
    """Whether fail-fast under this tolerance lets run B's loss `b` go on beside run A's `a`."""
    reference = Reference.of({0: [{"step": 1, "loss": a.hex()}]}, Tolerance(atol, rtol))
    assert reference is not None
    return not reference.differs(0, {"step": 1, "loss": b.hex()})


def test_fail_fast_answers_as_the_rule_on_every_edge_case() -> None:
    differ = [case for case in CASES
              if fail_fast_allows(*case) != Tolerance(atol=case[2], rtol=case[3]).allows(
                  *case[:2])]
    assert differ == []


def test_the_array_form_answers_as_the_scalar_form() -> None:
    for atol, rtol in TOLERANCES:
        pairs = list(itertools.product(VALUES, VALUES))
        a = np.array([pair[0] for pair in pairs])
        b = np.array([pair[1] for pair in pairs])
        scalar = [Tolerance(atol=atol, rtol=rtol).allows(x, y) for x, y in pairs]
        assert agree(a, b, atol, rtol).tolist() == scalar


@pytest.mark.parametrize(("a", "b", "atol", "rtol", "expected"), [
    (NAN, NAN, 0.0, 0.0, True),  # a training that yields NaN twice reproduces
    (NAN, 1.0, HUGE, 1.0, False),
    (INF, INF, 0.0, 0.0, True),
    (-INF, -INF, 0.0, 0.0, True),
    (INF, -INF, 0.0, 1.0, False),  # |a - b| = inf <= rtol * inf would say yes
    (1.0, INF, 0.0, 1.0, False),
    (HUGE, INF, HUGE, 2.0, False),
    (-0.0, 0.0, 0.0, 0.0, True),
    (HUGE, -HUGE, 0.0, 1.0, False),  # the difference overflows to inf
    (HUGE, -HUGE, 0.0, 2.0, True),  # and so does the allowance: inf <= inf
    (TINY, 0.0, 0.0, 0.0, False),
    (TINY, 0.0, TINY, 0.0, True),
    (1.0, 1.001, 1e-3, 0.0, True),
    (1.0, 1.0 + 2**-52, 0.0, 0.0, False),
    (1.0, 1.0 + 2**-52, 0.0, 1e-15, True),
])
def test_edge_cases(a: float, b: float, atol: float, rtol: float, expected: bool) -> None:
    assert Tolerance(atol=atol, rtol=rtol).allows(a, b) is expected


def test_tensors_json_numbers_and_upgrade_losses_use_the_same_rule() -> None:
    tolerance = Tolerance(atol=0.0, rtol=1e-3)
    config = ToleranceConfig.from_document({"atol": 0.0, "rtol": 1e-3})
    for a, b in [(NAN, NAN), (1.0, INF), (INF, INF), (1.0, 1.0005), (1.0, 1.1)]:
        expected = tolerance.allows(a, b)
        tensor = compare_tensors("t", np.array([a, 2.0]), np.array([b, 2.0]), tolerance)
        assert tensor["status"] in (("equal", "within_tolerance") if expected
                                    else ("different",)), (a, b)
        assert (compare_numbers(a, b, tolerance)[0] != "different") is expected, (a, b)
        side_a = RunSide("A", [{"step": 1, "loss": a.hex()}], {})
        side_b = RunSide("B", [{"step": 1, "loss": b.hex()}], {})
        assert (first_loss_outside(side_a, side_b, config) is None) is expected, (a, b)
