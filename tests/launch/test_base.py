"""What launchers receive and return: run specs, outcomes and a run's Python environment."""

from __future__ import annotations

from pathlib import Path

from repro_gate.launch.base import PythonEnvironment, RunOutcome, RunSpec


def test_a_python_environment_names_its_bin_folder_and_interpreter() -> None:
    local = PythonEnvironment(Path("/cache/envs/abc"))
    in_volume = PythonEnvironment(Path("/opt/repro-gate/env"), volume="repro-gate-env-123")

    assert local.bin_dir == Path("/cache/envs/abc/bin")
    assert local.python == Path("/cache/envs/abc/bin/python")
    assert (local.volume, in_volume.volume) == (None, "repro-gate-env-123")


def test_a_run_spec_has_no_environment_workspace_or_hidden_folder_unless_given() -> None:
    spec = RunSpec("A", "deterministic", ["python", "t.py"], Path("/w"), Path("/w/out/A"),
                   {}, None, Path("/w/out/A.log"), [])
    other = RunSpec("B", "deterministic", ["python", "t.py"], Path("/w"), Path("/w/out/B"),
                    {}, None, Path("/w/out/B.log"), [])

    assert (spec.python_environment, spec.workspace, spec.hidden) == (None, None, ())
    assert not spec.stop.is_set() and spec.stop is not other.stop  # each run's own


def test_each_outcome_has_its_own_details() -> None:
    first, second = RunOutcome(0, 1.5), RunOutcome(None, 3.0, timed_out=True)
    first.details["container"] = "abc"

    assert second.details == {}
    assert (second.exit_code, second.timed_out) == (None, True)
