"""What the gate saw: whether the probe loaded, why not (read from the command), and how that
qualifies or stops the verdict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from repro_gate.errors import ErrorKind, GateError
from repro_gate.gate.evidence import (
    CLEARS_PATH,
    SKIPPING_FLAGS,
    UNKNOWN,
    Evidence,
    check,
    check_run,
    gather,
    qualify,
    why_not_loaded,
)
from repro_gate.gate.training_run import RunRecord
from repro_gate.gate.verdict import BITWISE_EQUAL, reason
from repro_gate.render.observed import ARTIFACTS_ONLY, NOT_APPLIED


def record(name: str, status: dict[str, Any] | None, steps: int = 0,
           artifacts: list[Any] | None = None) -> RunRecord:
    return RunRecord(
        name=name, mode="deterministic", launcher="local", run_dir=Path(f"/runs/{name}"),
        log_path=Path(f"/logs/{name}.log"), exit_code=0, wall_seconds=1.0, timed_out=False,
        stopped=None, trajectory=[{"step": s + 1} for s in range(steps)], alerts=[],
        probe_status=status, in_process_fingerprint=None, artifacts=artifacts or [],
        unmatched_globs=[],
    )


@pytest.mark.parametrize(("command", "expected"), [
    ("python -I train.py", SKIPPING_FLAGS["I"]),
    ("python3.11 -u -E train.py", SKIPPING_FLAGS["E"]),
    (["/usr/bin/python", "-BS", "train.py"], SKIPPING_FLAGS["S"]),
    ("sh -c 'python -I train.py'", SKIPPING_FLAGS["I"]),
    ("PYTHONPATH=src python train.py", CLEARS_PATH),
    ("env -u PYTHONPATH python train.py", CLEARS_PATH),
    ("env -i python train.py", CLEARS_PATH),
    ("unset PYTHONPATH && python train.py", CLEARS_PATH),
])
def test_the_reason_is_read_from_the_command(command: str | list[str], expected: str) -> None:
    assert why_not_loaded(command) == expected


def test_extending_pythonpath_and_flags_after_the_script_are_not_blamed() -> None:
    assert why_not_loaded("PYTHONPATH=src:$PYTHONPATH python train.py") == UNKNOWN
    assert why_not_loaded(["python", "train.py", "-I"]) == UNKNOWN
    assert why_not_loaded(["python", "-m", "pkg", "-S"]) == UNKNOWN
    assert why_not_loaded(None) == UNKNOWN


def test_a_program_that_is_not_python_is_named() -> None:
    reason_text = why_not_loaded("env FOO=1 /opt/bin/trainer --epochs 1")

    assert reason_text.startswith("trainer is not Python")
    assert "have trainer start it" in reason_text


def test_gather_names_every_run_the_probe_did_not_load_in() -> None:
    records = [record("A", None), record("B", {"probe": "ok"}, steps=2), record("C", None)]

    evidence = gather("python -I train.py", records)

    assert evidence.probe_loaded is False
    assert evidence.steps_observed is True
    assert evidence.not_loaded == f"run A and run C: {SKIPPING_FLAGS['I']}"
    assert evidence.to_manifest() == {"probe_loaded": False, "steps_observed": True}


def test_gather_of_observed_runs_without_steps() -> None:
    evidence = gather("python train.py", [record("A", {}), record("B", {})])

    assert evidence == Evidence(True, False)


def test_no_observation_and_no_artifact_compared_is_the_error_probe_not_loaded() -> None:
    evidence = Evidence(False, False, "run A: the reason; the fix")

    with pytest.raises(GateError) as raised:
        check(evidence, {"artifacts": []})

    assert raised.value.kind is ErrorKind.PROBE_NOT_LOADED
    assert raised.value.message.startswith("the probe did not load in run A: the reason; the fix")
    check(evidence, {"artifacts": [{"path": "model.pt"}]})  # artifacts compared: no error
    check(None, {"artifacts": []})


def test_check_run_stops_only_an_unobserved_run_without_artifacts() -> None:
    with pytest.raises(GateError, match=r"the probe did not load in run B: .*drop -S"):
        check_run(record("B", None), "python -S train.py")

    check_run(record("B", None, artifacts=["model.pt"]), "python -S train.py")
    check_run(record("B", {"probe": "ok"}), "python -S train.py")


def test_qualify_adds_the_limitation_to_the_first_reason_only() -> None:
    reasons = [reason(BITWISE_EQUAL, "2 runs are bitwise equal: 1 artifacts"),
               reason("other", "second")]

    unobserved = qualify(reasons, Evidence(False, False, "run A: why"))
    no_steps = qualify(reasons, Evidence(True, False))

    assert unobserved[0]["message"] == (
        f"2 runs are bitwise equal: 1 artifacts ({ARTIFACTS_ONLY}, {NOT_APPLIED})")
    assert unobserved[1] == reasons[1]
    assert no_steps[0]["message"].endswith(f"({ARTIFACTS_ONLY})")
    assert qualify(reasons, Evidence(True, True)) == reasons
    assert qualify(reasons, None) == reasons
    assert qualify([], Evidence(False, False)) == []
