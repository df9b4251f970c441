"""Collecting a run's artifacts from its run directory and its working copy, with real files."""

from __future__ import annotations

import os
from pathlib import Path

from repro_gate import notices
from repro_gate.config.model import DEFAULT_RUN_DIR_GLOBS, DEFAULT_WORKDIR_GLOBS
from repro_gate.gate.collect import collect, globs_for, written_files, written_nearest
from repro_gate.gate.workcopy import WORK_SUBDIR
from repro_gate.probe import PROBE_SUBDIR


def write(path: Path, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_configured_globs_apply_to_both_places_and_defaults_differ() -> None:
    assert globs_for(["*.json"]) == (["*.json"], ["*.json"])
    assert globs_for(None) == (list(DEFAULT_RUN_DIR_GLOBS), list(DEFAULT_WORKDIR_GLOBS))
    assert globs_for([]) == (list(DEFAULT_RUN_DIR_GLOBS), list(DEFAULT_WORKDIR_GLOBS))


def test_defaults_take_every_run_file_but_only_checkpoints_of_the_working_copy(
    tmp_path: Path,
) -> None:
    write(tmp_path / "metrics.json")
    write(tmp_path / "nested" / "out.bin")
    write(tmp_path / PROBE_SUBDIR / "trajectory.jsonl")
    write(tmp_path / WORK_SUBDIR / "model.pt")
    write(tmp_path / WORK_SUBDIR / "checkpoints" / "last.pt")  # not at the copy's top
    write(tmp_path / WORK_SUBDIR / "notes.txt")

    collection = collect(tmp_path, None)

    assert [a.rel_path for a in collection.artifacts] == ["metrics.json", "model.pt",
                                                          "nested/out.bin"]
    by_rel = {a.rel_path: a.path for a in collection.artifacts}
    assert by_rel["model.pt"] == tmp_path / WORK_SUBDIR / "model.pt"
    assert collection.unmatched_globs == []
    assert collection.outside == []


def test_the_same_name_in_the_run_directory_and_the_working_copy_is_a_clash_both_compared(
    tmp_path: Path,
) -> None:
    write(tmp_path / "model.pt", "from the run directory")
    write(tmp_path / WORK_SUBDIR / "model.pt", "from the working copy")
    said: list[str] = []

    with notices.sent_to(said.append):
        collection = collect(tmp_path, ["*.pt"])

    by_rel = {a.rel_path: a.path.read_text() for a in collection.artifacts}
    assert by_rel == {"model.pt": "from the run directory",
                      f"{WORK_SUBDIR}/model.pt": "from the working copy"}
    assert said == [f"repro-gate: warning: {tmp_path / 'model.pt'} and"
                    f" {tmp_path / WORK_SUBDIR / 'model.pt'}: the same artifact name in the run"
                    " directory and the working copy; both are compared, the working copy's as"
                    " work/model.pt"]


def test_a_file_reached_through_a_linked_folder_is_never_collected(tmp_path: Path) -> None:
    elsewhere = write(tmp_path / "elsewhere" / "checkpoints" / "last.pt").parent
    run_dir = tmp_path / "run"
    (run_dir / WORK_SUBDIR).mkdir(parents=True)
    os.symlink(elsewhere, run_dir / WORK_SUBDIR / "checkpoints")

    collection = collect(run_dir, ["checkpoints/*.pt"])

    assert collection.artifacts == []
    assert collection.outside == [run_dir / WORK_SUBDIR / "checkpoints" / "last.pt"]


def test_a_configured_glob_that_matches_nothing_is_reported(tmp_path: Path) -> None:
    write(tmp_path / WORK_SUBDIR / "checkpoints" / "last.pt")

    collection = collect(tmp_path, ["checkpoints/*.pt", "*.safetensors"])

    assert [a.rel_path for a in collection.artifacts] == ["checkpoints/last.pt"]
    assert collection.unmatched_globs == ["*.safetensors"]


def test_a_glob_does_not_reach_the_probe_files_or_the_working_copy_from_the_top(
    tmp_path: Path,
) -> None:
    write(tmp_path / PROBE_SUBDIR / "status.json")
    write(tmp_path / WORK_SUBDIR / "notes.txt")

    collection = collect(tmp_path, ["**/*.json"])

    assert collection.artifacts == []
    assert collection.unmatched_globs == ["**/*.json"]


def test_a_symlink_out_of_the_run_is_reported_and_never_collected(tmp_path: Path) -> None:
    secret = write(tmp_path / "elsewhere" / "secret.pt")
    run_dir = tmp_path / "run"
    write(run_dir / "model.pt")
    os.symlink(secret, run_dir / "stolen.pt")
    said: list[str] = []

    with notices.sent_to(said.append):
        collection = collect(run_dir, ["*.pt"])

    assert [a.rel_path for a in collection.artifacts] == ["model.pt"]
    assert collection.outside == [run_dir / "stolen.pt"]
    assert said == [f"repro-gate: warning: {run_dir / 'stolen.pt'} leads outside the run"
                    " directory (symlink); not collected"]


def test_a_symlink_inside_the_run_is_not_collected_twice(tmp_path: Path) -> None:
    write(tmp_path / "model.pt")
    os.symlink(tmp_path / "model.pt", tmp_path / "alias.pt")

    collection = collect(tmp_path, ["*.pt"])

    assert [a.rel_path for a in collection.artifacts] == ["model.pt"]
    assert collection.outside == []


def test_a_missing_run_directory_collects_nothing(tmp_path: Path) -> None:
    collection = collect(tmp_path / "absent", ["*.pt"])

    assert collection.artifacts == []
    assert collection.unmatched_globs == ["*.pt"]


def test_a_glob_that_matched_nothing_is_told_the_nearest_files_the_run_wrote(
    tmp_path: Path,
) -> None:
    write(tmp_path / "metrics.json")
    write(tmp_path / PROBE_SUBDIR / "trajectory.jsonl")  # the probe's own: not the run's
    for name in ("ckpt/model.pth", "ckpt/optim.pth", "ckpt/sched.pth", "ckpt/scaler.pth",
                 "logs/train.log", "notes.txt"):
        write(tmp_path / WORK_SUBDIR / name)

    assert written_files(tmp_path) == ["ckpt/model.pth", "ckpt/optim.pth", "ckpt/scaler.pth",
                                       "ckpt/sched.pth", "logs/train.log", "metrics.json",
                                       "notes.txt"]
    assert written_nearest(tmp_path, "checkpoints/*.pt") == (
        "the run wrote (5 nearest of 7): ckpt/optim.pth, ckpt/scaler.pth, ckpt/model.pth,"
        " ckpt/sched.pth, logs/train.log")


def test_a_run_that_wrote_few_files_or_none_says_so(tmp_path: Path) -> None:
    assert written_nearest(tmp_path, "*.pt") == "the run wrote no file"
    write(tmp_path / WORK_SUBDIR / "model.pth")

    assert written_nearest(tmp_path, "*.pt") == "the run wrote: model.pth"
