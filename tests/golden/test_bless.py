"""`repro-gate bless`: a passing gate's manifest made into the golden file of its machine class,
read back from run A's directory; a manifest whose runs did not reproduce, or whose steps were
not observed, is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers.paths import ROOT
from safetensors.numpy import save_file

from repro_gate import probe
from repro_gate.config import Config
from repro_gate.errors import EXIT_NOT_BLESSABLE, ErrorKind, GateError
from repro_gate.golden import document
from repro_gate.golden.bless import NotBlessable, bless, not_blessable, run_data

FIXTURE = json.loads((ROOT / "tests/fixtures/manifest/manifest-v3.json").read_text())


def run_dir(tmp_path: Path) -> Path:
    """Run A's directory: the probe's trajectory, a checkpoint in the working copy, metrics."""
    directory = tmp_path / "runs" / "det-1"
    trajectory = directory / probe.PROBE_SUBDIR / probe.TRAJECTORY_FILE
    trajectory.parent.mkdir(parents=True)
    records = [{"step": n, "loss": (1.0 / n).hex(), "inputs": f"i{n}", "grads": {"w": f"g{n}"},
                "params": {"w": f"p{n}"}, "init": {"w": "w0"}} for n in (1, 2, 3)]
    trajectory.write_text("".join(json.dumps(r) + "\n" for r in records))
    (directory / "work" / "ckpt").mkdir(parents=True)
    save_file({"w": np.ones(3, dtype=np.float32)},
              str(directory / "work" / "ckpt" / "model.safetensors"))
    (directory / "metrics.json").write_text('{"loss": 0.33}')
    return directory


def manifest(tmp_path: Path, verdict: str = "pass", codes: tuple[str, ...] = ()) -> Path:
    record: dict[str, Any] = json.loads(json.dumps(FIXTURE))
    record["verdict"] = verdict
    record["reasons"] = [{"code": code, "message": code} for code in codes]
    run = record["runs"][0]
    run["run_dir"] = str(run_dir(tmp_path))
    run["artifacts"] = [{"path": "ckpt/model.safetensors", "sha256": "0" * 64, "bytes": 1},
                        {"path": "metrics.json", "sha256": "0" * 64, "bytes": 1}]
    path = tmp_path / "out" / "manifest.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(record))
    return path


def test_a_passing_gate_is_blessed_into_its_machine_class_s_file(tmp_path: Path) -> None:
    config = Config(workdir=tmp_path, output_dir=tmp_path / "out")
    blessed = bless(config, manifest(tmp_path))
    assert blessed.path == tmp_path / ".repro-gate" / "golden" / "gpu-a10g-x1.json"
    assert blessed.updated is False
    written = document.read(blessed.path)
    assert written == blessed.document
    assert [row[document.STEP] for row in written["steps"]] == [1, 2, 3]
    assert [entry["path"] for entry in written["artifacts"]] == [
        "ckpt/model.safetensors", "metrics.json"]
    assert [t["name"] for t in written["artifacts"][0]["tensors"]] == ["w"]
    assert written["gate"] == FIXTURE["gate"]


def test_blessing_again_replaces_the_earlier_file(tmp_path: Path) -> None:
    config = Config(workdir=tmp_path, output_dir=tmp_path / "out")
    path = manifest(tmp_path)
    bless(config, path)
    assert bless(config, path).updated is True


def test_a_manifest_whose_runs_did_not_reproduce_is_refused(tmp_path: Path) -> None:
    config = Config(workdir=tmp_path, output_dir=tmp_path / "out")
    path = manifest(tmp_path, "fail", ("trajectory_diverged", "artifact_different"))
    with pytest.raises(NotBlessable) as refused:
        bless(config, path)
    assert refused.value.exit_code == EXIT_NOT_BLESSABLE
    assert refused.value.kind == ErrorKind.GOLDEN
    assert str(refused.value) == (
        f"{path}: its runs did not reproduce (verdict fail: artifact_different,"
        " trajectory_diverged); nothing blessed")
    assert not (tmp_path / ".repro-gate").exists()


@pytest.mark.parametrize(("verdict", "codes", "blessable"), [
    ("pass", [], True),
    ("fail", ["numerics_changed"], True),
    ("fail", ["cost_over_budget", "within_tolerance"], True),
    ("fail", ["numerics_changed", "trajectory_diverged"], False),
    ("error", ["numerics_changed"], False),
])
def test_only_failures_of_reproducing_runs_may_be_blessed(verdict: str, codes: list[str],
                                                          blessable: bool) -> None:
    record = {"verdict": verdict, "reasons": [{"code": c} for c in codes], "runs": [{}],
              "fingerprint": {}}
    assert (not_blessable(record) is None) is blessable


def test_a_gate_without_a_run_has_nothing_to_bless() -> None:
    record = {"verdict": "pass", "reasons": [], "runs": [], "fingerprint": {}}
    assert not_blessable(record) == "its gate recorded no run to bless"
    without_fingerprint = {"verdict": "pass", "reasons": [], "runs": [{}]}
    assert not_blessable(without_fingerprint) == "its gate recorded no run to bless"


@pytest.mark.parametrize("run", [
    {"steps": 0},  # an older manifest, without `evidence`
    {"steps": 4, "evidence": {"probe_loaded": False, "steps_observed": False}},
])
def test_a_gate_whose_steps_were_not_observed_is_refused(tmp_path: Path,
                                                         run: dict[str, Any]) -> None:
    path = manifest(tmp_path)
    record = json.loads(path.read_text())
    record["runs"][0]["steps"] = run["steps"]
    if "evidence" in run:
        record["evidence"] = run["evidence"]
    path.write_text(json.dumps(record))

    with pytest.raises(NotBlessable) as refused:
        bless(Config(workdir=tmp_path, output_dir=tmp_path / "out"), path)

    assert refused.value.exit_code == EXIT_NOT_BLESSABLE
    assert str(refused.value) == (
        f"{path}: no optimizer step of its runs was observed (a verdict from the artifacts"
        " alone), and a golden trajectory is run A's steps; nothing blessed")
    assert not (tmp_path / ".repro-gate").exists()


def test_an_artifact_gone_from_the_run_directory_says_to_run_again(tmp_path: Path) -> None:
    directory = run_dir(tmp_path)
    record = {"runs": [{"run_dir": str(directory), "artifacts": [{"path": "gone.pt"}]}],
              "fingerprint": FIXTURE["fingerprint"], "gate": "trainer"}
    with pytest.raises(GateError, match=r"artifact gone\.pt of run A is no longer in") as error:
        run_data(record)
    assert error.value.kind == ErrorKind.GOLDEN
    record["runs"][0]["artifacts"] = [{"path": "metrics.json"}]
    data = run_data(record)
    assert data.artifacts == [("metrics.json", directory / "metrics.json")]
    assert [r["step"] for r in data.trajectory] == [1, 2, 3]
