"""Runs V-<factor>: what each varies, and why a factor is `not_run` (runs A and B differ, the
machine or the launcher cannot vary it) before anything runs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from repro_gate.config import Config, VaryConfig
from repro_gate.gate import vary_runs
from repro_gate.gate.training_run import RunRecord
from repro_gate.launch import namespaces
from repro_gate.launch.base import RunSpec
from repro_gate.launch.local import LocalLauncher


class ContainerLike(LocalLauncher):
    """A launcher that, like Docker's, isolates no run in namespaces and has libfaketime in
    its image."""

    name = "docker"
    LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

    def isolates(self, output_dir: Path) -> bool:
        return False

    def shares_by_binding(self) -> bool:
        return True

    def find_file(self, candidates: tuple[str, ...]) -> str | None:
        return self.LIBFAKETIME if self.LIBFAKETIME in candidates else None


def config_in(tmp_path: Path, *factors: Any) -> Config:
    workdir = tmp_path / "project"
    workdir.mkdir(exist_ok=True)
    return Config(workdir=workdir, output_dir=workdir / "out",
                  vary=VaryConfig(factors=factors))


def record(tmp_path: Path, name: str, threads: int | None = 2, **fields: Any) -> RunRecord:
    fingerprint = {"threads": {"torch_num_threads": threads}} if threads else None
    base = RunRecord(
        name=name, mode="deterministic", launcher="local", run_dir=tmp_path / name,
        log_path=tmp_path / f"{name}.log", exit_code=0, wall_seconds=1.0, timed_out=False,
        stopped=None, trajectory=[{"step": 1}], alerts=[], probe_status={},
        in_process_fingerprint=fingerprint, artifacts=[], unmatched_globs=[])
    return replace(base, **fields)


def never_run(spec: RunSpec) -> RunRecord:
    raise AssertionError(f"run {spec.name} should not have started")


def test_no_factor_is_varied_when_runs_a_and_b_differ_or_the_gate_stopped(tmp_path: Path) -> None:
    config = config_in(tmp_path, "threads", "path")
    records = [record(tmp_path, "A"), record(tmp_path, "B", stopped="divergence")]

    found = vary_runs.run_all(config, LocalLauncher(), records, never_run)

    assert [(r["factor"], r["status"], r["note"]) for r in found] == [
        ("threads", "not_run", vary_runs.NOT_AGREED), ("path", "not_run", vary_runs.NOT_AGREED)]
    assert vary_runs.recorded(config, None, agreed=True)[0]["note"] == vary_runs.STOPPED_EARLIER
    assert vary_runs.recorded(config, found, agreed=False) == found


def test_without_namespaces_the_host_name_and_the_path_are_not_run_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(namespaces.ENV_NAMESPACES, "off")
    config = config_in(tmp_path, "hostname", "path")

    found = vary_runs.run_all(config, LocalLauncher(), [record(tmp_path, "A"),
                                                        record(tmp_path, "B")], never_run)

    assert [r["status"] for r in found] == ["not_run", "not_run"]
    assert found[0]["note"] == ("it is varied in a local run's own namespaces, which this run"
                                " cannot have (REPRO_GATE_NAMESPACES=off)")


def test_without_libfaketime_the_clock_is_not_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(vary_runs, "LIBFAKETIME_PATHS", (str(tmp_path / "none" / "lib.so.1"),))
    config = config_in(tmp_path, "time")

    (found,) = vary_runs.run_all(config, LocalLauncher(), [record(tmp_path, "A"),
                                                           record(tmp_path, "B")], never_run)

    assert (found["status"], found["note"]) == (
        "not_run", "libfaketime is not installed on this machine (the Debian package faketime)")


def test_a_container_is_given_no_fuse_for_the_listings(tmp_path: Path) -> None:
    config = config_in(tmp_path, "fileordering")

    (found,) = vary_runs.run_all(config, ContainerLike(), [record(tmp_path, "A"),
                                                           record(tmp_path, "B")], never_run)

    assert (found["status"], found["note"]) == ("not_run", (
        "directory listings are reordered by disorderfs, a FUSE file system, which a docker run"
        " is not given"))


def test_a_container_varies_the_host_name_and_the_path_in_its_own_settings(
    tmp_path: Path,
) -> None:
    config = config_in(tmp_path, "hostname", "path", "time")
    specs: list[RunSpec] = []

    def execute(spec: RunSpec, reference: object) -> RunRecord:
        specs.append(spec)
        return record(tmp_path, spec.name)

    found = vary_runs.run_all(config, ContainerLike(), [record(tmp_path, "A"),
                                                        record(tmp_path, "B")], execute)

    assert [r["status"] for r in found] == ["same", "same", "same"]
    hostname, path, clock = specs
    assert hostname.hostname == vary_runs.VARIED_HOSTNAME
    assert (hostname.workspace_at, path.hostname) == (None, None)
    assert path.workspace_at is not None and path.workspace_at.is_dir()
    assert found[1]["values"] == {"A": str(config.workdir), "V": str(path.workspace_at)}
    assert clock.preload == ContainerLike.LIBFAKETIME
    assert clock.env["FAKETIME"] == f"+{vary_runs.CLOCK_OFFSET_DAYS}d"


def test_the_thread_count_needs_run_a_s_record(tmp_path: Path) -> None:
    config = config_in(tmp_path, "threads")

    (found,) = vary_runs.run_all(config, LocalLauncher(), [record(tmp_path, "A", threads=None),
                                                           record(tmp_path, "B")], never_run)

    assert found["status"] == "not_run"
    assert found["note"].startswith("run A recorded no thread count")
