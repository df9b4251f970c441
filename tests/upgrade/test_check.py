"""`repro-gate upgrade` up to the first gate: locks read, changes that cannot change a run here,
errors recorded as the verdict `error`, and the candidate written over the lock on request (no
gate runs in these cases)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from repro_gate.config import Config, ToleranceConfig
from repro_gate.config.model import UpgradeConfig
from repro_gate.errors import EXIT_ERROR, EXIT_PASS, ConfigError
from repro_gate.launch.base import LineSink
from repro_gate.upgrade.check import (
    CandidateSource,
    SilentPublisher,
    UpgradeOptions,
    configuration_error,
    reproducible,
    run_upgrade,
    tolerance_of,
)

BASELINE = "numpy==2.0.1\n"
WINDOWS_ONLY = 'numpy==2.0.1\npywin32==306 ; sys_platform == "win32"\n'


def no_launcher(config: Config) -> Any:
    raise AssertionError("no gate runs when nothing that applies here changed")


def quiet(name: str) -> LineSink:
    return lambda line: None


def project(tmp_path: Path) -> tuple[Config, Path]:
    (tmp_path / "requirements.txt").write_text(BASELINE, encoding="utf-8")
    candidate = tmp_path / "candidate.txt"
    candidate.write_text(WINDOWS_ONLY, encoding="utf-8")
    return Config(workdir=tmp_path, output_dir=tmp_path / "out"), candidate


def test_a_change_that_does_not_apply_here_keeps_the_numerics(tmp_path: Path) -> None:
    config, candidate = project(tmp_path)

    outcome = run_upgrade(config, UpgradeOptions(CandidateSource(lock=candidate)), no_launcher,
                          SilentPublisher(), quiet)

    assert outcome.exit_code == EXIT_PASS
    assert outcome.path == tmp_path / "out" / "upgrade.json"
    written = json.loads(outcome.path.read_text(encoding="utf-8"))
    assert (written["verdict"], written["reasons"]) == ("same", [])
    assert written["changes"] == [{"name": "pywin32", "old": None, "new": "306",
                                   "kind": "added", "direct": True, "applies": False}]
    assert written["candidate"]["lock"] == str(
        tmp_path / "out" / "upgrade" / "candidate.requirements.txt")
    assert (tmp_path / "out" / "upgrade.md").is_file()
    assert (tmp_path / "requirements.txt").read_text(encoding="utf-8") == BASELINE


def test_write_lock_copies_the_candidate_over_the_projects_lock(tmp_path: Path) -> None:
    config, candidate = project(tmp_path)

    run_upgrade(config, UpgradeOptions(CandidateSource(lock=candidate), write_lock=True),
                no_launcher, SilentPublisher(), quiet)

    assert (tmp_path / "requirements.txt").read_text(encoding="utf-8") == WINDOWS_ONLY


def test_a_missing_lock_is_the_verdict_error_and_nothing_is_written_over(
    tmp_path: Path,
) -> None:
    config = Config(workdir=tmp_path, output_dir=tmp_path / "out")

    outcome = run_upgrade(config, UpgradeOptions(CandidateSource(), write_lock=True),
                          no_launcher, SilentPublisher(), quiet)

    assert outcome.exit_code == EXIT_ERROR
    assert outcome.document["verdict"] == "error"
    assert outcome.document["reasons"] == [{
        "code": "lockfile",
        "message": f"no lockfile in {tmp_path}: looked for uv.lock and requirements.txt"
                   " (set upgrade.lock)"}]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["out"]


def test_a_configuration_error_still_leaves_an_upgrade_record(tmp_path: Path) -> None:
    outcome = configuration_error(ConfigError("upgrade.max_bisect_runs: must be an integer >= 1"),
                                  tmp_path, tmp_path / "out", SilentPublisher())

    assert outcome.exit_code == EXIT_ERROR
    written = json.loads((tmp_path / "out" / "upgrade.json").read_text(encoding="utf-8"))
    assert written["reasons"] == [{"code": "config",
                                   "message": "upgrade.max_bisect_runs: must be an integer >= 1"}]


def test_a_gate_that_failed_only_on_its_cost_budget_is_reproducible() -> None:
    def manifest(verdict: str, *codes: str) -> dict[str, Any]:
        return {"verdict": verdict, "reasons": [{"code": code} for code in codes]}

    assert reproducible(manifest("pass", "bitwise_equal"))
    assert reproducible(manifest("fail", "cost_over_budget"))
    assert not reproducible(manifest("fail", "cost_over_budget", "trajectory_diverged"))
    assert not reproducible(manifest("error", "run_failed"))


def test_the_upgrade_tolerance_wins_over_the_gates(tmp_path: Path) -> None:
    gate = ToleranceConfig(bitwise=False, atol=1e-3)
    upgrade = ToleranceConfig(bitwise=False, rtol=1e-2)

    assert tolerance_of(Config(tmp_path, tmp_path, tolerance=gate)) == gate
    assert tolerance_of(Config(tmp_path, tmp_path, tolerance=gate,
                               upgrade=UpgradeConfig(tolerance=upgrade))) == upgrade
