"""The PR comment's chart of the loss against the golden trajectory: a Mermaid `xychart-beta`
block, which GitHub renders, of the per-step loss difference (run minus golden).

Drawn when the manifest's `comparison.golden` says the numbers moved (`changed`,
`within_tolerance`), and for the base branch's golden file when the pull request re-blessed its
own. At most MAX_POINTS points: a longer trajectory is cut into that many stretches of steps,
each drawn by its largest difference. Mermaid reads plain decimals only, so the values are
scaled by a power of ten named in the axis title.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from repro_gate.compare.structured import is_number
from repro_gate.render.markdown_text import as_list, as_mapping

MAX_POINTS = 100
DRAWN_STATUSES = ("changed", "within_tolerance")
SIGNIFICANT_DIGITS = 4
PLAIN_EXPONENTS = range(-3, 4)  # magnitudes shown unscaled: 0.001 up to 9999


def golden_chart(manifest: Mapping[str, Any]) -> str:
    """The chart(s) for the comment; empty when there is nothing to draw."""
    golden = as_mapping(as_mapping(manifest.get("comparison")).get("golden"))
    charts = []
    if golden.get("status") in DRAWN_STATUSES:
        charts.append(_chart(golden, "the golden trajectory"))
    base = as_mapping(golden.get("against_base"))
    if base:
        charts.append(_chart(base, "the base branch's golden trajectory"))
    return "\n\n".join(chart for chart in charts if chart)


def _chart(comparison: Mapping[str, Any], against: str) -> str:
    points = _points(comparison.get("loss_delta"))
    if not points:
        return ""
    drawn = _thinned(points)
    scale = _exponent(max(abs(delta) for _, delta in drawn))
    unit = f" (x1e{scale})" if scale else ""
    divergence = as_mapping(comparison.get("first_divergence"))
    step = divergence.get("step")
    where = f", first divergence from it at step {step}" if is_number(step) else ""
    path = comparison.get("path")
    named = f" (`{path}`)" if isinstance(path, str) and path else ""
    lines = [
        "xychart-beta",
        f'    title "Loss difference against {_quoted(against)}{where}"',
        f'    x-axis "step" [{", ".join(str(s) for s, _ in drawn)}]',
        f'    y-axis "loss difference{unit}"',
        f"    line [{', '.join(_number(delta, scale) for _, delta in drawn)}]",
    ]
    thinned = (f", {len(drawn)} of {len(points)} steps drawn (the largest difference of each"
               " stretch)") if len(drawn) < len(points) else ""
    caption = f"**Loss against {against}**{named}: run minus golden, per step{thinned}."
    return caption + "\n\n```mermaid\n" + "\n".join(lines) + "\n```"


def _points(entries: Any) -> list[tuple[int, float]]:
    """(step, delta) in step order; entries of the wrong shape or not finite are left out."""
    points = []
    for entry in as_list(entries):
        step, delta = as_mapping(entry).get("step"), as_mapping(entry).get("delta")
        if is_number(step) and is_number(delta) and math.isfinite(delta):
            points.append((int(step), float(delta)))
    return sorted(points)


def _thinned(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """At most MAX_POINTS points: each of that many stretches by its largest |difference|."""
    if len(points) <= MAX_POINTS:
        return points
    size = len(points) / MAX_POINTS
    stretches = [points[round(i * size):round((i + 1) * size)] for i in range(MAX_POINTS)]
    return [max(stretch, key=lambda point: abs(point[1])) for stretch in stretches if stretch]


def _exponent(largest: float) -> int:
    """The power of ten the values are divided by: 0 when they read well as they are."""
    if largest == 0:
        return 0
    exponent = math.floor(math.log10(largest))
    return 0 if exponent in PLAIN_EXPONENTS else exponent


def _number(value: float, scale: int) -> str:
    """A plain decimal (never `1e-07`, which Mermaid does not read), compact."""
    scaled = value / 10.0 ** scale
    text = f"{scaled:.{SIGNIFICANT_DIGITS}g}"
    if "e" in text:  # a tiny value beside large ones
        text = f"{scaled:.{SIGNIFICANT_DIGITS + 3}f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _quoted(text: str) -> str:
    """Text for inside a Mermaid string: no double quotes."""
    return text.replace('"', "'")
