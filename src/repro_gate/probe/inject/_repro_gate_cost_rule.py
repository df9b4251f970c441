"""The cost run's early stop: the rule the probe applies at the end of each round of timed blocks.

A copy of cost/estimate.py's `narrow_enough` (with its t table and block timing), since the probe
never imports repro_gate; tests/probe/test_cost_early_stop.py checks that the two agree. Only the
standard library.
"""

from __future__ import annotations

import math
import statistics

MIN_PAIRS = 3  # as cost/estimate.py: never an interval from fewer units
# t(0.975, df) for df = 1..30, as cost/estimate.py (a test keeps the two equal).
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
Z_975 = 1.959964


def block_time(times: list[float], drain: float | None) -> float:
    """A block's step time, as cost/estimate.py's block_times: the median of its steps' times;
    after a drain, the block's total with the drain over its steps."""
    return (sum(times) + drain) / len(times) if drain is not None else statistics.median(times)


def round_log_ratios(blocks: dict[int, tuple[str, list[float], float | None]], size: int,
                     rounds: int) -> list[float]:
    """log(deterministic / default block time) of each of the first `rounds` complete rounds."""
    ratios = []
    for index in range(rounds):
        arms = {blocks[b][0]: block_time(blocks[b][1], blocks[b][2])
                for b in range(index * size, (index + 1) * size) if b in blocks}
        det, default = arms.get("deterministic"), arms.get("default")
        if det and default and det > 0 and default > 0:
            ratios.append(math.log(det / default))
    return ratios


def t_975(df: int) -> float:
    """The 97.5% quantile of Student's t with `df` degrees of freedom (as cost/estimate.py)."""
    if df <= len(T_975):
        return T_975[df - 1]
    z = Z_975
    return (z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
            + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3))


def narrow_enough(log_ratios: list[float], min_pairs: int, width_pct: float) -> bool:
    """The early stop's rule, a copy of cost/estimate.py's narrow_enough (a test keeps them
    equal): at least `min_pairs` units, and the 95% interval at most `width_pct` wide."""
    if min_pairs <= 0 or len(log_ratios) < max(min_pairs, MIN_PAIRS):
        return False
    mean = statistics.fmean(log_ratios)
    half = t_975(len(log_ratios) - 1) * statistics.stdev(log_ratios) / math.sqrt(len(log_ratios))
    return (math.expm1(mean + half) - math.expm1(mean - half)) * 100.0 <= width_pct
