"""Each run works in its own fresh copy of the working directory; the gate's own files are no
part of the code's state. Real gates on a fresh git clone of a real project: three in turn on
one clone, each test asserting on what they left."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.gate_cli import Result, check, script
from helpers.git_repo import git
from helpers.paths import TRAININGS

from repro_gate.gate import workcopy
from repro_gate.gate.file_lock import OUTPUT_LOCK, WORKDIR_LOCK_DIR
from repro_gate.launch import namespaces
from repro_gate.launch.progress import ENV_STATUS_SECONDS


def fresh_clone(tmp_path: Path, *scripts: str) -> Path:
    """A clone of a one-commit repository holding `scripts` and the tiny model they use."""
    origin, clone = tmp_path / "origin", tmp_path / "clone"
    origin.mkdir()
    for name in ("tiny.py", *scripts):
        shutil.copy(TRAININGS / name, origin / name)
    git(origin, "init", "-q")
    git(origin, "add", ".")
    git(origin, "commit", "-qm", "training")
    git(tmp_path, "clone", "-q", str(origin), str(clone))
    return clone


@dataclass
class Gate:
    """A gate on the clone, and what it left there when it ended."""

    result: Result
    manifest: dict
    logs: dict[str, str]  # run name -> its log
    status: str  # `git status --porcelain --untracked-files=all`
    top_level: list[str]  # the clone's own entries
    work: dict[str, list[str]]  # run name -> what its working copy kept


def gate(clone: Path, name: str) -> Gate:
    result = check(clone, "--no-cost", *script(name))
    assert result.exit_code == 0, result.stdout + result.stderr
    manifest = result.manifest
    logs = clone / "repro-gate-out" / "logs"
    work = {run["name"]: Path(run["run_dir"]) / workcopy.WORK_SUBDIR for run in manifest["runs"]}
    return Gate(
        result, manifest,
        {run: (logs / f"{run}.log").read_text() for run in work},
        git(clone, "status", "--porcelain", "--untracked-files=all"),
        sorted(p.name for p in clone.iterdir()),
        {run: sorted(p.relative_to(path).as_posix() for p in path.rglob("*"))
         for run, path in work.items()})


@pytest.fixture(scope="module")
def gates(tmp_path_factory: pytest.TempPathFactory) -> list[Gate]:
    """Three gates in turn on one fresh clone: a training that resumes from a checkpoint it
    finds, a deterministic one, and the deterministic one again once the user added a file."""
    clone = fresh_clone(tmp_path_factory.mktemp("work-copy"), "resume_from_checkpoint.py",
                        "deterministic.py")
    first = gate(clone, "resume_from_checkpoint.py")
    second = gate(clone, "deterministic.py")
    (clone / "notes.txt").write_text("mine")
    return [first, second, gate(clone, "deterministic.py")]


def test_each_run_starts_from_a_fresh_copy_and_the_tree_stays_clean(gates: list[Gate]) -> None:
    first = gates[0]
    for run in ("A", "B"):
        assert "resume found: False" in first.logs[run], run
    assert first.status == ""
    assert first.top_level == sorted([".git", WORKDIR_LOCK_DIR, "repro-gate-out",
                                      "deterministic.py", "resume_from_checkpoint.py", "tiny.py"])
    # What each run wrote stays in its run directory, and only that.
    assert set(first.work) == {"A", "B"}
    for run in first.manifest["runs"]:
        assert {a["path"] for a in run["artifacts"]} == {"model.pt"}, run
        assert first.work[run["name"]] == [
            "checkpoints", "checkpoints/last.pt", "model.pt"], run["name"]


def test_a_fresh_clone_stays_clean_in_the_fingerprint(gates: list[Gate]) -> None:
    # The first gate, and the second one with the first one's output in the tree.
    for clean in gates[:2]:
        code = clean.manifest["fingerprint"]["code"]
        assert (code["dirty"], code["untracked_files"], code["diff_sha256"]) == (False, 0, None)
        clean_tree = next(item for item in clean.manifest["checklist"]["items"]
                          if item["id"] == "clean_tree")
        assert clean_tree["status"] == "pass", clean_tree
    # A file of the user's still counts.
    assert gates[2].manifest["fingerprint"]["code"]["dirty"] is True


def test_the_copy_leaves_out_the_gates_files_and_keeps_links(tmp_path: Path) -> None:
    workdir, output_dir, outside = tmp_path / "work", tmp_path / "work" / "out", tmp_path / "data"
    other_output = workdir / "other-out"
    for directory in (workdir / "sub", output_dir / "runs", other_output, outside,
                      workdir / WORKDIR_LOCK_DIR):
        directory.mkdir(parents=True)
    (other_output / OUTPUT_LOCK).write_text("1\n")
    (workdir / WORKDIR_LOCK_DIR / "lock").write_text("2\n")
    (workdir / "sub" / "train.py").write_text("print()\n")
    (outside / "set.bin").write_bytes(b"data")
    (workdir / "data").symlink_to("../data")
    (workdir / "sub" / "train_link.py").symlink_to("train.py")

    copy = workcopy.make(workdir, output_dir / "runs" / "A" / "work", output_dir)

    assert sorted(p.relative_to(copy.path).as_posix() for p in copy.path.rglob("*")) == [
        "data", "sub", "sub/train.py", "sub/train_link.py"]
    assert (copy.path / "data" / "set.bin").read_bytes() == b"data"  # the link still leads there
    assert (copy.path / "sub" / "train_link.py").readlink() == Path("train.py")
    # A run rewrites a file in place and adds one: the user's file is untouched.
    with open(copy.path / "sub" / "train.py", "r+") as handle:
        handle.write("x")
    (copy.path / "model.pt").write_bytes(b"weights")
    assert copy.written() == {"sub/train.py", "model.pt"}
    assert (workdir / "sub" / "train.py").read_text() == "print()\n"
    copy.keep_only_written()
    assert sorted(p.relative_to(copy.path).as_posix() for p in copy.path.rglob("*")) == [
        "model.pt", "sub", "sub/train.py"]


def test_the_probes_records_name_the_users_files(tmp_path: Path) -> None:
    workdir, output_dir = tmp_path / "work", tmp_path / "out"
    workdir.mkdir()
    (workdir / "train.py").write_text("print()\n")
    copy = workcopy.make(workdir, output_dir / "runs" / "A" / "work", output_dir)
    probe_dir = output_dir / "runs" / "A" / ".repro-gate"
    probe_dir.mkdir()
    alerts = [{"file": f"{copy.path}/train.py", "line": 3},
              {"file": f"{copy.path}-other/train.py", "line": 4}, {"cwd": str(copy.path)}]
    (probe_dir / "alerts.json").write_text(json.dumps(alerts))

    copy.name_workspace_files(probe_dir.parent)

    assert json.loads((probe_dir / "alerts.json").read_text()) == [
        {"file": f"{workdir}/train.py", "line": 3},
        {"file": f"{copy.path}-other/train.py", "line": 4}, {"cwd": str(workdir)}]


# Saves where it ran in its model: runs at different paths would write different bytes.
RECORDS_ITS_PATH = """\
import os
import torch
from tiny import TinyNet

torch.manual_seed(0)
torch.save({"cwd": os.getcwd(), "model": TinyNet().state_dict()}, "model.pt")
"""
SMALL_FILES = 3000  # enough for a copy to last several status intervals


def recording_project(root: Path) -> Path:
    """A project with a virtualenv, a data folder listed under `data:`, and many small files."""
    project = root / "project"
    (project / ".venv" / "lib").mkdir(parents=True)
    (project / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (project / ".venv" / "lib" / "big.so").write_bytes(b"\0" * 1_000_000)
    (project / "data").mkdir()
    (project / "data" / "train.bin").write_bytes(b"\1" * 1_000_000)
    (project / "many").mkdir()
    for index in range(SMALL_FILES):
        (project / "many" / f"{index}.txt").write_text(str(index))
    shutil.copy(TRAININGS / "tiny.py", project / "tiny.py")
    (project / "train.py").write_text(RECORDS_ITS_PATH)
    (project / ".repro-gate.yml").write_text("data: [data]\n")
    return project


@pytest.fixture(scope="module")
def launch_modes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    """One gate with namespaces, one with them switched off, status lines every 0.05 s."""
    results = {}
    for switch in ("on", "off"):
        project = recording_project(tmp_path_factory.mktemp(f"namespaces-{switch}"))
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv(ENV_STATUS_SECONDS, "0.05")
            patch.setenv(namespaces.ENV_NAMESPACES, switch)
            results[switch] = check(project, "--no-cost", "-a", "model.pt",
                                    *script("train.py"))
    return results


@pytest.mark.parametrize("switch", ["on", "off"])
def test_both_working_copies_give_the_same_verdict(
    launch_modes: dict[str, Result], switch: str,
) -> None:
    result = launch_modes[switch]

    assert result.exit_code == 0, result.stdout + result.stderr
    for run in result.manifest["runs"]:
        work = Path(run["run_dir"]) / workcopy.WORK_SUBDIR
        assert sorted(p.name for p in work.iterdir()) == ["model.pt"], run["name"]
    assert not (result.workdir / "repro-gate-out" / workcopy.COPY_SUBDIR).exists()


def test_switched_off_the_runs_get_a_copy_that_links_the_venv_and_data_and_says_so(
    launch_modes: dict[str, Result],
) -> None:
    result = launch_modes["off"]

    notice = ("repro-gate: working copies: each run gets a copy of the working directory, not an"
              " overlay in its own namespaces (REPRO_GATE_NAMESPACES=off)")
    assert result.stderr.count(notice) == 1, result.stderr
    # --quiet: the copy's status lines still show, with how far it got
    copying = [line for line in result.stderr.splitlines()
               if line.startswith("repro-gate: making the working copy of run A: ")]
    assert copying, result.stderr
    assert re.search(r": \d+ files, \d+ MB copied, \d+ s elapsed$", copying[-1]), copying


def test_with_namespaces_nothing_is_copied_and_nothing_is_said(
    launch_modes: dict[str, Result],
) -> None:
    result = launch_modes["on"]

    assert "working copies:" not in result.stderr
    assert "making the working copy" not in result.stderr
