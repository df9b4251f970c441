"""Comparing the artifacts of two runs: checkpoints tensor by tensor, metric files, bytes."""

from repro_gate.compare.artifacts import compare_artifact
from repro_gate.compare.files import sha256_file
from repro_gate.compare.tolerance import Tolerance, tolerance_for

__all__ = ["Tolerance", "compare_artifact", "sha256_file", "tolerance_for"]
