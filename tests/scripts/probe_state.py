"""Prints, as JSON, whether the probe is loaded and what it changed in this process."""

import json
import sys

import torch

print(
    json.dumps(
        {
            "probe_loaded": "_repro_gate_probe" in sys.modules,
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "backward_wrapped": torch.Tensor.backward.__module__ != "torch._tensor",
        }
    )
)
