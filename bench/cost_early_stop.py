"""Coverage of the cost's 95% interval under the cost run's early stop, by simulation.

Pairs are drawn as log ratios around a known cost (normal, or skewed: centred exponential), and
each simulated run stops as the probe does (`cost/estimate.py` `narrow_enough`: at least
`--min-pairs` rounds, the interval at most `--width` points wide) or at `--rounds`. Prints, per
minimum and pair spread, how often the t-interval covers the true cost and the mean number of
pairs used: the figures behind docs/performance.md "Early stop".

Usage: python bench/cost_early_stop.py [--trials 4000] [--rounds 16] [--width 10]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics

from repro_gate.cost.estimate import estimate, narrow_enough

TRUE_LOG_RATIO = 0.05  # a 5.1% cost


def draw(rng: random.Random, sd: float, skewed: bool) -> float:
    noise = sd * (rng.expovariate(1.0) - 1.0) if skewed else rng.gauss(0.0, sd)
    return TRUE_LOG_RATIO + noise


def one_run(rng: random.Random, sd: float, skewed: bool, min_pairs: int, rounds: int,
            width: float) -> tuple[bool, int]:
    """Whether the interval at the stop covers the true cost, and the pairs used."""
    ratios: list[float] = []
    while len(ratios) < rounds:
        ratios.append(draw(rng, sd, skewed))
        if narrow_enough(ratios, min_pairs, width):
            break
    interval = estimate(ratios).ci95_pct
    truth = math.expm1(TRUE_LOG_RATIO) * 100.0
    # The interval is rounded to 0.01 points; the truth is compared at the same precision.
    covered = interval is not None and interval[0] <= round(truth, 2) <= interval[1]
    return covered, len(ratios)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=16)
    parser.add_argument("--width", type=float, default=10.0)
    args = parser.parse_args()
    rng = random.Random(2026)
    for min_pairs in (0, 3, 4, 8):  # 0: never stop early
        for sd in (0.02, 0.05, 0.08, 0.12):
            for skewed in (False, True):
                runs = [one_run(rng, sd, skewed, min_pairs, args.rounds, args.width)
                        for _ in range(args.trials)]
                print(json.dumps({
                    "min_pairs": min_pairs, "sd_pp": sd * 100, "skewed": skewed,
                    "coverage": round(sum(c for c, _ in runs) / len(runs), 3),
                    "mean_pairs": round(statistics.fmean(n for _, n in runs), 1)}))


if __name__ == "__main__":
    main()
