"""What the gate saw: whether the probe loaded, why not (read from the command), and how that
qualifies or stops the verdict: a Python training needs the probe, a program that is not Python
can be judged by its artifacts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from repro_gate.config import Config
from repro_gate.errors import ErrorKind, GateError
from repro_gate.gate.command_facts import SKIPPING_FLAGS
from repro_gate.gate.evidence import Evidence, check, check_run, gather, qualify
from repro_gate.gate.training_run import RunRecord
from repro_gate.gate.verdict import BITWISE_EQUAL, reason
from repro_gate.render.observed import ARTIFACTS_ONLY, NOT_APPLIED


def config(tmp_path: Path, command: str) -> Config:
    return Config(workdir=tmp_path, output_dir=tmp_path / "repro-gate-out", command=command)


def record(name: str, status: dict[str, Any] | None, steps: int = 0,
           artifacts: list[Any] | None = None) -> RunRecord:
    return RunRecord(
        name=name, mode="deterministic", launcher="local", run_dir=Path(f"/runs/{name}"),
        log_path=Path(f"/logs/{name}.log"), exit_code=0, wall_seconds=1.0, timed_out=False,
        stopped=None, trajectory=[{"step": s + 1} for s in range(steps)], alerts=[],
        probe_status=status, in_process_fingerprint=None, artifacts=artifacts or [],
        unmatched_globs=[],
    )


def test_gather_names_every_run_the_probe_did_not_load_in(tmp_path: Path) -> None:
    records = [record("A", None), record("B", {"probe": "ok"}, steps=2), record("C", None)]

    evidence = gather(config(tmp_path, "python -I train.py"), records)

    assert evidence.probe_loaded is False
    assert evidence.steps_observed is True
    assert evidence.python is True
    assert evidence.not_loaded == f"run A and run C: {SKIPPING_FLAGS['I']}"
    assert evidence.to_manifest() == {"probe_loaded": False, "steps_observed": True}


def test_gather_of_observed_runs_without_steps(tmp_path: Path) -> None:
    evidence = gather(config(tmp_path, "python train.py"), [record("A", {}), record("B", {})])

    assert evidence == Evidence(True, False)


def test_an_unobserved_python_training_is_the_error_even_with_artifacts_compared() -> None:
    evidence = Evidence(False, False, "run A: the reason; the fix", python=True)

    with pytest.raises(GateError) as raised:
        check(evidence, {"artifacts": [{"path": "model.pt"}]})

    assert raised.value.kind is ErrorKind.PROBE_NOT_LOADED
    assert raised.value.message == "the probe did not load in run A: the reason; the fix"


def test_a_program_that_is_not_python_needs_compared_artifacts() -> None:
    evidence = Evidence(False, False, "run A: the reason; the fix", python=False)

    with pytest.raises(GateError) as raised:
        check(evidence, {"artifacts": []})

    assert raised.value.kind is ErrorKind.PROBE_NOT_LOADED
    assert raised.value.message.startswith("the probe did not load in run A: the reason; the fix")
    assert "or compare files only" in raised.value.message
    check(evidence, {"artifacts": [{"path": "model.bin"}]})  # artifacts compared: no error
    check(None, {"artifacts": []})


def test_check_run_stops_an_unobserved_python_run_and_a_run_without_artifacts(
    tmp_path: Path,
) -> None:
    (tmp_path / "train.sh").write_text("printf 'w' > model.bin\n")

    with pytest.raises(GateError, match=r"the probe did not load in run B: .*drop -S"):
        check_run(config(tmp_path, "python -S train.py"), record("B", None, artifacts=["m.pt"]))
    with pytest.raises(GateError, match=r"run B: sh is not Python"):
        check_run(config(tmp_path, "sh train.sh"), record("B", None))

    check_run(config(tmp_path, "sh train.sh"), record("B", None, artifacts=["model.bin"]))
    check_run(config(tmp_path, "python -S train.py"), record("B", {"probe": "ok"}))


def test_qualify_adds_the_limitation_to_the_first_reason_only() -> None:
    reasons = [reason(BITWISE_EQUAL, "2 runs are bitwise equal: 1 artifacts"),
               reason("other", "second")]

    unobserved = qualify(reasons, Evidence(False, False, "run A: why", python=False))
    no_steps = qualify(reasons, Evidence(True, False))

    assert unobserved[0]["message"] == (
        f"2 runs are bitwise equal: 1 artifacts ({ARTIFACTS_ONLY}, {NOT_APPLIED});"
        " the probe did not load in run A: why")
    assert unobserved[1] == reasons[1]
    assert no_steps[0]["message"].endswith(f"({ARTIFACTS_ONLY})")
    assert qualify(reasons, Evidence(True, True)) == reasons
    assert qualify(reasons, None) == reasons
    assert qualify([], Evidence(False, False)) == []
