"""The gate's `comparison.golden`: run A against its machine class's golden file (none yet, the
same, changed with the attribution), against the base branch's re-blessed version, and the
bless command that writes it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.git_repo import git
from helpers.paths import ROOT

from repro_gate.config import Config
from repro_gate.config.model import GoldenConfig
from repro_gate.golden import document
from repro_gate.golden.check import bless_command, compare_with_golden, now
from repro_gate.golden.history import ENV_BASE_REF

FINGERPRINT = json.loads((ROOT / "tests/fixtures/manifest/manifest-v3.json").read_text())[
    "fingerprint"]


@pytest.fixture(autouse=True)
def no_enclosing_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    monkeypatch.delenv(ENV_BASE_REF, raising=False)


def run_of(losses: list[float], fingerprint: dict[str, Any] = FINGERPRINT) -> document.RunData:
    trajectory = [{"step": n, "loss": loss.hex(), "inputs": f"i{n}", "grads": {"w": f"g{n}"},
                   "params": {"w": f"p{n}-{loss}"}, "init": {"w": "w0"}}
                  for n, loss in enumerate(losses, 1)]
    return document.RunData(trajectory, fingerprint, [], "trainer")


def compared(config: Config, run: document.RunData, **kwargs: Any) -> dict[str, Any]:
    return compare_with_golden(config, run, document.build(run, now()), **kwargs)


def bless_into(config: Config, run: document.RunData) -> Path:
    golden = document.build(run, now())
    path = config.workdir / ".repro-gate" / "golden" / f"{golden['machine_class']}.json"
    document.write(golden, path)
    return path


def test_without_a_golden_file_there_is_nothing_to_compare(tmp_path: Path) -> None:
    config = Config(workdir=tmp_path, output_dir=tmp_path / "out")
    result = compared(config, run_of([1.0, 0.5]))
    assert (result["status"], result["path"], result["machine_class"]) == (
        "no_golden", ".repro-gate/golden", "gpu-a10g-x1")
    assert result["golden_machine_class"] is None
    assert result["bless_command"].startswith("repro-gate bless --manifest ")


def test_a_run_equal_to_its_golden_file_is_the_same(tmp_path: Path) -> None:
    config = Config(workdir=tmp_path, output_dir=tmp_path / "out")
    bless_into(config, run_of([1.0, 0.5]))
    result = compared(config, run_of([1.0, 0.5]))
    assert (result["status"], result["steps_compared"]) == ("same", 2)
    assert result["path"] == ".repro-gate/golden/gpu-a10g-x1.json"
    assert (result["software_diff"], result["attribution"], result["against_base"]) == (
        [], None, None)


def test_changed_numerics_in_the_same_software_are_the_code(tmp_path: Path) -> None:
    config = Config(workdir=tmp_path, output_dir=tmp_path / "out")
    bless_into(config, run_of([1.0, 0.5]))

    def never(*args: Any) -> Any:
        raise AssertionError("run G runs only when both the software and the code changed")

    result = compared(config, run_of([1.0, 0.25]), run_in=never)
    assert result["status"] == "changed"
    assert result["first_divergence"]["step"] == 2
    assert result["attribution"]["kind"] == "code"


def test_changed_software_with_the_golden_commit_missing_is_unknown(tmp_path: Path) -> None:
    config = Config(workdir=tmp_path, output_dir=tmp_path / "out")
    bless_into(config, run_of([1.0, 0.5]))
    newer = json.loads(json.dumps(FINGERPRINT))
    newer["env"]["torch"] = "2.6.0"
    result = compared(config, run_of([1.0, 0.25], newer))
    assert result["software_diff"] == [
        {"field": "torch", "golden": FINGERPRINT["env"]["torch"], "run": "2.6.0"}]
    assert result["attribution"]["kind"] == "unknown"
    assert "is not in this clone" in result["attribution"]["reason"]


def test_a_golden_file_named_directly_is_used_whatever_its_class(tmp_path: Path) -> None:
    config = Config(workdir=tmp_path, output_dir=tmp_path / "out",
                    golden=GoldenConfig(path="main.json"))
    cpu = json.loads(json.dumps(FINGERPRINT))
    cpu["hardware"]["gpus"] = []
    golden = document.build(run_of([1.0], cpu), now())
    document.write(golden, tmp_path / "main.json")
    result = compared(config, run_of([1.0]))
    assert (result["path"], result["machine_class"], result["golden_machine_class"]) == (
        "main.json", "gpu-a10g-x1", golden["machine_class"])
    assert result["status"] == "same"


def test_a_re_blessed_golden_file_is_also_compared_with_the_base_branch_s(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    git(tmp_path, "init", "-q")
    config = Config(workdir=tmp_path, output_dir=tmp_path / "out")
    path = bless_into(config, run_of([1.0, 0.5]))
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "bless")
    git(tmp_path, "checkout", "-q", "-b", "feature")
    bless_into(config, run_of([1.0, 0.25]))  # the pull request re-blessed
    git(tmp_path, "commit", "-q", "-am", "re-bless")
    monkeypatch.setenv(ENV_BASE_REF, "main")
    result = compared(config, run_of([1.0, 0.25]))
    assert result["status"] == "same"
    base = result["against_base"]
    rel = path.relative_to(tmp_path).as_posix()
    assert (base["path"], base["status"]) == (f"main:{rel}", "changed")
    assert base["first_divergence"]["step"] == 2


def test_the_bless_command_names_the_config_or_the_golden_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    plain = Config(workdir=tmp_path, output_dir=tmp_path / "out")
    assert bless_command(plain) == "repro-gate bless --manifest out/manifest.json"
    named = Config(workdir=tmp_path, output_dir=tmp_path / "out",
                   golden=GoldenConfig(path="g/main.json"))
    assert bless_command(named) == (
        "repro-gate bless --golden g/main.json --manifest out/manifest.json")
    from_file = Config(workdir=tmp_path, output_dir=tmp_path / "out",
                       config_file=tmp_path / "repro-gate.yaml",
                       golden=GoldenConfig(path="g/main.json"))
    assert bless_command(from_file) == (
        "repro-gate bless --config repro-gate.yaml --manifest out/manifest.json")


def renamed_run(run: document.RunData, new: str) -> document.RunData:
    """`run` with its tensor `w` named `new`, the same values."""
    def rename(digests: Any) -> Any:
        return {new: digests["w"]} if isinstance(digests, dict) else digests
    trajectory = [{key: rename(value) for key, value in record.items()}
                  for record in run.trajectory]
    return document.RunData(trajectory, run.fingerprint, run.artifacts, run.gate)


def test_a_renamed_tensor_with_equal_values_is_the_same_and_listed(tmp_path: Path) -> None:
    config = Config(workdir=tmp_path, output_dir=tmp_path / "out")
    bless_into(config, run_of([1.0, 0.5]))
    result = compared(config, renamed_run(run_of([1.0, 0.5]), "proj.w"))
    assert (result["status"], result["steps_compared"]) == ("same", 2)
    assert result["renamed"] == [{"golden": "w", "run": "proj.w"}]
    changed = compared(config, renamed_run(run_of([1.0, 0.25]), "proj.w"))
    assert (changed["status"], changed["first_divergence"]["step"]) == ("changed", 2)


def seeded_at(line: int) -> dict[str, Any]:
    fingerprint = json.loads(json.dumps(FINGERPRINT))
    fingerprint["random"]["seeding"] = {"gate_seed": None, "training": [
        {"generator": "torch", "call": "torch.manual_seed", "seed": 0, "file": "train.py",
         "line": line}]}
    return fingerprint


def test_a_moved_seeding_line_with_changed_numerics_is_the_code(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    (tmp_path / "train.py").write_text("import torch\ntorch.manual_seed(0)\n")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "train")
    golden = seeded_at(2)
    golden["code"]["commit"] = git(tmp_path, "rev-parse", "HEAD")
    config = Config(workdir=tmp_path, output_dir=tmp_path / "out")
    bless_into(config, run_of([1.0, 0.5], golden))
    (tmp_path / "train.py").write_text("import torch\n\n\ntorch.manual_seed(0)\n")

    def never(*args: Any) -> Any:
        raise AssertionError("the software is the golden file's: run G has nothing to decide")

    result = compared(config, run_of([1.0, 0.25], seeded_at(4)), run_in=never)
    assert result["status"] == "changed"
    assert result["software_diff"] == []
    assert result["attribution"]["kind"] == "code"
    assert "train.py:2 in the golden file" in result["attribution"]["reason"]
