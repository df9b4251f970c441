"""`repro-gate check --vary` in Docker mode: each run starts in its working copy at the
workspace's own path, the virtualenv and the data shown read-only from the workspace; runs
V-time (the image's libfaketime), V-hostname and V-path vary their factor in the container's own
settings, and the listings, which need FUSE, are not run. One gate: a training seeded from the
day, which says where it runs."""

from __future__ import annotations

import shutil
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import docker
import pytest
from helpers.docker_fixtures import TEST_LABEL, PinnedImage
from helpers.gate_cli import Result, check
from helpers.paths import TRAININGS

from repro_gate import validation
from repro_gate.gate import vary_runs

pytestmark = pytest.mark.docker

FACTORS = "time,hostname,path,fileordering"


@pytest.fixture(scope="module")
def varied(torch_image: PinnedImage, docker_client: docker.DockerClient,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[Result]:
    workspace = tmp_path_factory.mktemp("vary") / "workspace"
    (workspace / "data").mkdir(parents=True)
    (workspace / "data" / "shard.txt").write_text("shard-1\n")
    (workspace / ".venv").mkdir()
    (workspace / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    for name in ("tiny.py", "vary_time.py", "vary_time_where.py"):
        shutil.copy(TRAININGS / name, workspace / name)
    workspace.chmod(0o755)
    gate = f"test-{uuid.uuid4().hex[:10]}"
    yield check(workspace, "--name", gate, "--image", torch_image.reference, "--gpus", "none",
                "--timeout", "180", "--no-cost", "--data", "data", "--vary", FACTORS,
                "--", "python", "vary_time_where.py", timeout=600)
    assert docker_client.containers.list(all=True, filters={"label": f"{TEST_LABEL}={gate}"}
                                         ) == []


def by_factor(result: Result) -> dict[str, dict[str, Any]]:
    assert validation.errors("manifest", result.manifest) == []
    return {entry["factor"]: entry for entry in result.manifest["comparison"]["vary"]}


def log(result: Result, run: str) -> str:
    return (result.workdir / "repro-gate-out" / "logs" / f"{run}.log").read_text()


def test_runs_start_in_their_copy_at_the_workspaces_path_with_the_data_read_only(
    varied: Result,
) -> None:
    for run in ("A", "B"):
        assert f"cwd={varied.workdir} host={socket.gethostname()}\n" in log(varied, run)
        assert "data=shard-1 venv=True\ndata=read-only\n" in log(varied, run)
    assert sorted(p.name for p in varied.workdir.iterdir()) == [
        ".repro-gate-workdir", ".venv", "data", "repro-gate-out", "tiny.py", "vary_time.py",
        "vary_time_where.py"]
    assert [p.name for p in (varied.workdir / "data").iterdir()] == ["shard.txt"]


def test_the_clock_changes_the_numbers_and_the_host_name_and_the_path_do_not(
    varied: Result,
) -> None:
    assert varied.exit_code == 1, varied.stdout + varied.stderr
    assert [r["code"] for r in varied.manifest["reasons"]][:1] == ["not_portable"]
    vary = by_factor(varied)
    assert [vary[f]["status"] for f in FACTORS.split(",")] == [
        "changed", "same", "same", "not_run"]
    assert vary["time"]["first_divergence"]["cause"] == "initialization"
    assert vary["time"]["values"]["V"] > vary["time"]["values"]["A"]
    assert f"host={vary_runs.VARIED_HOSTNAME}\n" in log(varied, "V-hostname")
    moved = vary["path"]["values"]["V"]
    assert moved != str(varied.workdir)
    assert f"cwd={moved} " in log(varied, "V-path")
    assert "data=shard-1 venv=True\n" in log(varied, "V-path")
    assert vary["fileordering"]["note"] == vary_runs.NO_FUSE.format(launcher="docker")
    # The result travels in the attestation statement too.
    assert (varied.workdir / "repro-gate-out" / "attestation.intoto.json").is_file()
