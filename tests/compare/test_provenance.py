"""Runs of different code or commands are said to be so before any cause."""

from __future__ import annotations

from repro_gate.compare.provenance import Provenance, mismatches, of_manifest


def test_a_manifest_gives_its_commit_and_command_as_one_string() -> None:
    document = {"fingerprint": {"code": {"commit": "a" * 40, "dirty": False}},
                "config": {"command": ["python", "train.py"]}}
    assert of_manifest(document) == Provenance("a" * 40, False, "python train.py")
    assert of_manifest({}) == Provenance(None, None, None)


def test_different_commits_commands_and_dirty_trees_are_named() -> None:
    a = Provenance("a" * 40, False, "python train.py")
    b = Provenance("b" * 40, False, "python other.py")
    assert mismatches(a, b) == [
        "runs A and B are of different commits (aaaaaaaaaaaa and bbbbbbbbbbbb): code changes"
        " explain differences before any cause",
        "runs A and B ran different commands ('python train.py' and 'python other.py')"]
    dirty = Provenance("a" * 40, True, "python train.py")
    assert mismatches(a, dirty) == ["run B had uncommitted changes: the code may differ"]


def test_nothing_is_claimed_without_a_record() -> None:
    a = Provenance("a" * 40, False, "python train.py")
    assert mismatches(a, None) == mismatches(a, a) == []
    assert mismatches(a, Provenance(None, None, None)) == []
