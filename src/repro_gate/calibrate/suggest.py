"""The tolerance a spread suggests: twice the largest difference seen, rounded up to two
significant digits; 0 (bitwise) only where the runs agreed bit for bit."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal

from repro_gate.calibrate.spread import StepSpread, TensorSpread

MARGIN = 2.0  # the suggestion over the largest difference the runs showed


@dataclass(frozen=True)
class Bounds:
    """A relative and an absolute tolerance."""

    rtol: float
    atol: float


@dataclass(frozen=True)
class Suggestion:
    """The suggested `golden.tolerance`: the loss's (no step allowed outside) and the tensors'."""

    loss: Bounds
    tensors: Bounds
    steps_outside: int = 0

    def as_dict(self) -> dict[str, dict[str, float | int]]:
        return {"loss": {"rtol": self.loss.rtol, "atol": self.loss.atol,
                         "steps_outside": self.steps_outside},
                "tensors": {"rtol": self.tensors.rtol, "atol": self.tensors.atol}}

    def yaml(self) -> str:
        """The suggestion as the `golden:` block of a config file."""
        loss, tensors = self.loss, self.tensors
        return ("golden:\n"
                "  tolerance:\n"
                f"    loss: {{rtol: {number(loss.rtol)}, atol: {number(loss.atol)},"
                f" steps_outside: {self.steps_outside}}}\n"
                f"    tensors: {{rtol: {number(tensors.rtol)}, atol: {number(tensors.atol)}}}")


def suggest(loss: Sequence[StepSpread], tensors: Sequence[TensorSpread]) -> Suggestion:
    """The suggestion over the largest loss and tensor-summary differences seen."""
    return Suggestion(loss=_bounds([(s["max_rel_difference"], s["max_abs_difference"])
                                    for s in loss]),
                      tensors=_bounds([(t["max_rel_difference"], t["max_abs_difference"])
                                       for t in tensors]))


def _bounds(differences: list[tuple[float, float]]) -> Bounds:
    rtol = max((relative for relative, _ in differences), default=0.0)
    atol = max((absolute for _, absolute in differences), default=0.0)
    return Bounds(rtol=round_up(MARGIN * rtol), atol=round_up(MARGIN * atol))


def round_up(value: float) -> float:
    """`value` rounded up to two significant digits; never 0 when `value` is not."""
    if not value > 0 or not math.isfinite(value):
        return max(value, 0.0)
    exact = Decimal(value)
    exponent = exact.adjusted() - 1
    digits = exact.scaleb(-exponent).to_integral_value(rounding=ROUND_CEILING)
    rounded = float(digits.scaleb(exponent))
    if not math.isfinite(rounded):  # past the largest float: keep what was seen
        return value
    return rounded if rounded >= value else math.nextafter(rounded, math.inf)


def number(value: float) -> str:
    """A tolerance as YAML reads it back as a number: `0`, `0.05`, `1.2e-07`."""
    if value == 0:
        return "0"
    mantissa, _, exponent = repr(value).partition("e")
    if "." not in mantissa:  # YAML reads `1e-07` as a string, `1.0e-07` as a number
        mantissa += ".0"
    return f"{mantissa}e{exponent}" if exponent else mantissa
