"""repro-gate: a reproducibility gate for machine-learning training in CI."""

__version__ = "0.1.0"
