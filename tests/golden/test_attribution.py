"""Why the numbers changed: the software difference, the files that change what the training
computes, and the attribution to the code, the environment, or unknown with the reason."""

from __future__ import annotations

from repro_gate.golden.attribution import (
    CODE,
    ENVIRONMENT,
    UNKNOWN,
    attribute,
    both_changed,
    by_rebuild,
    not_rebuilt,
    software_diff,
    training_facts_diff,
    training_files,
)

FOLDERS = [".repro-gate/golden", "repro-gate-out"]
TORCH = [{"field": "torch", "golden": "2.5.1", "run": "2.6.0"}]
SEEDED_AT_5 = {"torch": "2.5.1", "commit": "aaa", "seeding": "torch.manual_seed(0) at train.py:5"}
SEEDED_AT_35 = {**SEEDED_AT_5, "commit": "bbb", "seeding": "torch.manual_seed(0) at train.py:35"}


def test_the_software_diff_lists_changed_fields_but_never_the_commit() -> None:
    golden = {"torch": "2.5.1", "python": "3.11", "commit": "aaa", "lock": None}
    run = {"torch": "2.6.0", "python": "3.11", "commit": "bbb", "lock": "uv.lock:12"}
    assert software_diff(golden, run) == [
        {"field": "torch", "golden": "2.5.1", "run": "2.6.0"},
        {"field": "lock", "golden": None, "run": "uv.lock:12"}]
    assert software_diff({"commit": "a"}, {"commit": "b"}) == []


def test_where_the_training_seeds_is_the_code_s_never_the_software_s() -> None:
    assert software_diff(SEEDED_AT_5, SEEDED_AT_35) == []
    facts = training_facts_diff(SEEDED_AT_5, SEEDED_AT_35)
    assert facts == [{"field": "seeding", "golden": "torch.manual_seed(0) at train.py:5",
                      "run": "torch.manual_seed(0) at train.py:35"}]
    # A refactor that moved the seeding line and changed the numerics: the code did it.
    found = attribute(software_diff(SEEDED_AT_5, SEEDED_AT_35), ["train.py"], FOLDERS, "aaa",
                      facts)
    assert found == {"kind": CODE, "reason": (
        "the software is the golden file's: the code changed the numerics (seeding:"
        " torch.manual_seed(0) at train.py:5 in the golden file, torch.manual_seed(0) at"
        " train.py:35 now)")}
    assert not both_changed(software_diff(SEEDED_AT_5, SEEDED_AT_35), ["train.py"], FOLDERS)


def test_locks_docs_workflows_and_the_gate_s_folders_do_not_change_the_training() -> None:
    changed = ["uv.lock", "requirements-dev.txt", "README.md", "docs/golden.md",
               ".github/workflows/ci.yml", "sub/notes.rst", ".repro-gate/golden/cpu-x.json",
               "repro-gate-out/manifest.json", "train.py", "src/model/layers.py", "LICENSE"]
    assert training_files(changed, FOLDERS) == ["train.py", "src/model/layers.py"]


def test_the_same_software_means_the_code_changed_the_numerics() -> None:
    found = attribute([], ["train.py"], FOLDERS, "abc")
    assert found["kind"] == CODE
    assert "the code changed" in found["reason"]


def test_changed_software_and_no_training_file_is_the_environment() -> None:
    found = attribute(TORCH, ["uv.lock", "README.md"], FOLDERS, "abc")
    assert found == {"kind": ENVIRONMENT,
                     "reason": "the software changed (torch) and no file the training runs"
                               " changed since the golden file's commit"}


def test_a_commit_missing_from_the_clone_is_unknown_and_says_how_to_fetch_it() -> None:
    found = attribute(TORCH, None, FOLDERS, "0123456789abcdef0123")
    assert found["kind"] == UNKNOWN
    assert "commit 0123456789ab is not in this clone" in found["reason"]
    assert "fetch-depth: 0" in found["reason"]


def test_both_changed_is_unknown_naming_three_files_and_how_many_more() -> None:
    changed = ["a.py", "b.py", "c.py", "d.py", "e.py"]
    found = attribute(TORCH, changed, FOLDERS, "abc")
    assert found["kind"] == UNKNOWN
    assert "the code (a.py, b.py, c.py and 2 more) changed" in found["reason"]
    assert both_changed(TORCH, changed, FOLDERS)
    assert not both_changed([], changed, FOLDERS)
    assert not both_changed(TORCH, None, FOLDERS)
    assert not both_changed(TORCH, ["uv.lock"], FOLDERS)


def test_run_g_decides_and_a_failed_rebuild_keeps_the_first_clause() -> None:
    assert by_rebuild(True)["kind"] == ENVIRONMENT
    assert by_rebuild(False)["kind"] == CODE
    found = attribute(TORCH, ["train.py"], FOLDERS, "abc")
    unknown = not_rebuilt(found, "no uv.lock at the golden file's commit")
    assert unknown["kind"] == UNKNOWN
    assert unknown["reason"] == (found["reason"].split("; ")[0]
                                 + "; no uv.lock at the golden file's commit")
