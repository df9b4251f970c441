"""`repro-gate check` says why runs diverge: one real tiny training per cause, through the CLI.

Each training (tests/trainings/cause_*.py) breaks reproducibility in exactly one place from a
known step, with OS entropy no seed reaches; the manifest must name that step, that cause and
its evidence.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.gate_cli import TORCHRUN, Result, check, script

from repro_gate import validation

FIRST_LAYER = ["body.0.weight", "body.0.bias"]
ALL_PARAMETERS = [*FIRST_LAYER, "body.2.weight", "body.2.bias"]  # cause_net.Net, in model order


def first_divergence(result: Result) -> dict[str, Any]:
    """The failed gate's first divergence, after the checks every failing cause shares."""
    assert result.exit_code == 1, result.stdout + result.stderr
    manifest = result.manifest
    assert validation.errors("manifest", manifest) == []
    assert manifest["verdict"] == "fail"
    assert manifest["runs"][1]["stopped"] == "divergence"  # run B stopped at that step
    divergence = manifest["comparison"]["first_divergence"]
    assert divergence["runs"] == ["A", "B"]
    return divergence


@pytest.mark.parametrize(("training", "step", "cause", "evidence"), [
    pytest.param("cause_init.py", 1, "initialization",
                 {"initial_parameters": ["body.0.weight"], "parameters": ALL_PARAMETERS},
                 id="initialisation-from-urandom"),
    pytest.param("cause_input.py", 2, "input",
                 {"loss_differs": True, "parameters": ALL_PARAMETERS},
                 id="unseeded-sampler-from-step-2"),
    pytest.param("cause_input_listing.py", 1, "input",
                 {"loss_differs": True, "parameters": ALL_PARAMETERS},
                 id="random-file-names-listed"),
    pytest.param("cause_forward.py", 3, "forward",
                 {"loss_differs": True, "module": "body.1", "parameters": ALL_PARAMETERS},
                 id="noisy-module-forward"),
    pytest.param("cause_backward.py", 4, "backward",
                 {"loss_differs": False, "gradients": FIRST_LAYER, "parameters": FIRST_LAYER},
                 id="noisy-autograd-backward"),
    pytest.param("cause_optimizer.py", 5, "optimizer",
                 {"loss_differs": False, "parameters": ["body.2.bias"]},
                 id="noisy-optimizer-update"),
])
def test_the_cause_of_the_first_divergence_is_named(
    project: Path, training: str, step: int, cause: str, evidence: dict[str, Any],
) -> None:
    # A gate per training: each breaks reproducibility in one place of its own.
    result = check(project, "--no-cost", "--runs", "2", *script(training))

    divergence = first_divergence(result)
    assert (divergence["step"], divergence["cause"], divergence["rank"]) == (step, cause, 0)
    assert {key: divergence.get(key) for key in evidence} == evidence
    if cause == "forward":
        assert divergence["localisation"]["status"] == "found"
    if cause == "optimizer":  # the gradients were equal: none is named
        assert divergence.get("gradients", []) == []


def test_rank_1_input_is_named_although_ddp_spreads_it_to_rank_0(project: Path) -> None:
    # Its own gate: the one training here under torchrun.
    # Under DDP the all-reduce gives rank 0 different gradients at step 3 too (a `backward`
    # look on rank 0); the evidence starts on rank 1, whose input differs.
    result = check(project, "--no-cost", "--runs", "2", "--", *TORCHRUN, "cause_rank1_input.py")

    divergence = first_divergence(result)
    assert (divergence["step"], divergence["cause"], divergence["rank"]) == (3, "input", 1)
    assert divergence["parameters"]  # after the all-reduce the parameters differ as well

