"""`repro-gate check --vary`: one more run per factor of the environment, compared with run A.

Each training of the corpus (tests/trainings/vary_*.py) reproduces in place and breaks under
exactly one factor; one gate varies three factors over the one that breaks under the path, so
`changed` and `same` show at once, and small gates cover the other factors, a factor that cannot
be varied (`not_run`) and a run V that crashes (`error`).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from helpers.gate_cli import Result, check, script
from helpers.paths import TRAININGS

from repro_gate import validation
from repro_gate.gate import vary_runs
from repro_gate.launch import listing, namespaces
from repro_gate.launch.local import LocalLauncher

NAMESPACES = namespaces.refusal(Path("/tmp")) is None
needs_namespaces = pytest.mark.skipif(not NAMESPACES, reason="no user namespaces here")


def gate(project: Path, training: str, factors: str) -> Result:
    for source in TRAININGS.glob("*.py"):
        shutil.copy(source, project / source.name)
    return check(project, "--no-cost", "--vary", factors, *script(training))


def by_factor(result: Result) -> dict[str, dict[str, Any]]:
    manifest = result.manifest
    assert validation.errors("manifest", manifest) == []
    return {entry["factor"]: entry for entry in manifest["comparison"]["vary"]}


@pytest.fixture(scope="module")
def path_gate(tmp_path_factory: pytest.TempPathFactory) -> Result:
    """vary_path.py, which stores an absolute path in its checkpoint, under three factors."""
    return gate(tmp_path_factory.mktemp("vary-path"), "vary_path.py", "threads,hostname,path")


@needs_namespaces
def test_the_factor_that_changes_the_numbers_fails_the_gate_as_not_portable(
    path_gate: Result,
) -> None:
    assert path_gate.exit_code == 1, path_gate.stdout + path_gate.stderr
    manifest = path_gate.manifest
    assert manifest["verdict"] == "fail"
    assert [r["code"] for r in manifest["reasons"]] == ["not_portable", "bitwise_equal"]
    assert manifest["reasons"][0]["message"] == (
        "the numbers change with path (model.pt: hparams.data_dir): store relative paths"
        " (no absolute path in checkpoints or saved hyperparameters)")
    headline = path_gate.stdout.splitlines()[0]
    assert headline == "repro-gate: FAIL: reproducible here, but not portable"


@needs_namespaces
def test_changed_for_the_path_and_same_for_the_thread_count_and_the_host_name(
    path_gate: Result,
) -> None:
    vary = by_factor(path_gate)
    assert [entry["status"] for entry in vary.values()] == ["same", "same", "changed"]
    threads = vary["threads"]["values"]
    assert threads["V"] == (1 if threads["A"] > 1 else 2)
    assert vary["hostname"]["values"]["V"] == vary_runs.VARIED_HOSTNAME
    path = vary["path"]
    assert path["values"]["A"] == str(path_gate.workdir)
    assert len(path["values"]["V"]) != len(path["values"]["A"])
    assert path["first_divergence"] is None  # the steps agree; the checkpoint does not
    assert path["artifacts"] == [{"path": "model.pt", "status": "different", "tensors": [],
                                  "keys": ["hparams.data_dir"]}]


@needs_namespaces
def test_each_factor_is_a_run_of_its_own_shown_in_the_vary_table(path_gate: Result) -> None:
    runs = {run["name"]: run for run in path_gate.manifest["runs"]}
    assert [name for name in runs] == ["A", "B", "V-threads", "V-hostname", "V-path"]
    assert {runs[name].get("purpose") for name in runs if name.startswith("V-")} == {"vary"}
    lines = path_gate.stdout.splitlines()
    start = lines.index("  vary (one factor of the environment at a time, each run against run A):")
    assert [line.split(":")[0].split(" (")[0].strip() for line in lines[start + 1:start + 4]] == [
        "threads", "hostname", "path"]
    assert not (path_gate.workdir / "model.pt").exists()  # the user's tree is left alone


def test_another_thread_count_parts_the_steps_with_their_cause(tmp_path: Path) -> None:
    result = gate(tmp_path, "vary_threads.py", "threads")

    assert result.exit_code == 1, result.stdout + result.stderr
    threads = by_factor(result)["threads"]
    assert threads["status"] == "changed"
    assert threads["first_divergence"]["step"] == 1
    assert threads["first_divergence"]["cause"] == "input"
    assert "pin the thread count" in result.manifest["reasons"][0]["message"]


@needs_namespaces
def test_another_host_name_changes_a_training_seeded_from_it(tmp_path: Path) -> None:
    result = gate(tmp_path, "vary_hostname.py", "hostname")

    hostname = by_factor(result)["hostname"]
    assert hostname["status"] == "changed"
    assert hostname["first_divergence"]["cause"] == "initialization"


@pytest.mark.skipif(LocalLauncher().find_file(vary_runs.LIBFAKETIME_PATHS) is None,
                    reason="libfaketime is not installed (the Debian package faketime)")
def test_a_clock_moved_on_changes_a_training_seeded_from_the_day(tmp_path: Path) -> None:
    result = gate(tmp_path, "vary_time.py", "time")

    time = by_factor(result)["time"]
    assert time["status"] == "changed", result.stdout
    assert time["first_divergence"]["cause"] == "initialization"
    assert time["values"]["V"] > time["values"]["A"]  # ISO dates, more than a year apart


@needs_namespaces
@pytest.mark.skipif(listing.refusal() is not None, reason=str(listing.refusal()))
def test_listings_in_another_order_change_a_training_that_reads_them_unsorted(
    tmp_path: Path,
) -> None:
    for source in TRAININGS.glob("*.py"):
        shutil.copy(source, tmp_path / source.name)
    subprocess.run([sys.executable, "vary_listing.py", "--write-shards"], cwd=tmp_path,
                   check=True, timeout=120)

    result = check(tmp_path, "--no-cost", "--vary", "fileordering", *script("vary_listing.py"))

    listing_order = by_factor(result)["fileordering"]
    assert listing_order["status"] == "changed"
    assert listing_order["first_divergence"]["cause"] == "input"
    assert "sort the listing" in result.manifest["reasons"][0]["message"]
    assert not list(Path(tempfile.gettempdir()).glob("repro-gate-listing-*"))  # unmounted


def test_a_factor_that_cannot_be_varied_is_not_run_and_a_crash_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(namespaces.ENV_NAMESPACES, "off")  # the host name's tool taken away

    result = gate(tmp_path, "vary_threads_crash.py", "threads,hostname")

    assert result.exit_code == 0, result.stdout + result.stderr  # never silently same
    vary = by_factor(result)
    assert vary["threads"]["status"] == "error"
    assert vary["threads"]["note"].startswith("run V-threads (deterministic) exited with code 1")
    assert vary["hostname"]["status"] == "not_run"
    assert "REPRO_GATE_NAMESPACES=off" in vary["hostname"]["note"]


def test_a_portable_training_is_the_same_under_every_factor_and_passes(tmp_path: Path) -> None:
    result = gate(tmp_path, "deterministic.py", "all")

    assert result.exit_code == 0, result.stdout + result.stderr
    statuses = {factor: entry["status"] for factor, entry in by_factor(result).items()}
    varied = {factor for factor, status in statuses.items() if status != "not_run"}
    assert {statuses[factor] for factor in varied} == {"same"}
    assert {"threads"} <= varied
