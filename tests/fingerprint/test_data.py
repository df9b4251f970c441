"""Checksums of data paths: per-file sha256 in byte order, listed as `sha256sum` would."""

from __future__ import annotations

import hashlib
from pathlib import Path

from repro_gate.fingerprint.data import data_label, hash_data, hash_path, list_files


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_single_file_is_listed_under_its_own_name(tmp_path: Path) -> None:
    content = b"a,1\nb,2\n"
    path = tmp_path / "labels.csv"
    path.write_bytes(content)

    entry = hash_path(path, "labels.csv", workers=1)

    assert list_files(path) == [""]
    assert entry["kind"] == "file" and (entry["files"], entry["bytes"]) == (1, 8)
    assert entry["file_sha256"] == {"labels.csv": sha(content)}
    assert entry["sha256"] == sha(f"{sha(content)}  labels.csv\n".encode())


def test_files_are_listed_in_byte_order_through_symlinked_folders(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "z.bin").write_bytes(b"z")
    root = tmp_path / "set"
    (root / "sub").mkdir(parents=True)
    (root / "b.txt").write_bytes(b"b")
    (root / "B.txt").write_bytes(b"B")
    (root / "sub" / "a.txt").write_bytes(b"a")
    (root / "linked").symlink_to(outside, target_is_directory=True)

    assert list_files(root) == ["B.txt", "b.txt", "linked/z.bin", "sub/a.txt"]


def test_the_digest_changes_with_a_rename_as_well_as_with_content(tmp_path: Path) -> None:
    root = tmp_path / "set"
    root.mkdir()
    (root / "a.txt").write_bytes(b"same")
    before = hash_path(root, "set/")["sha256"]

    (root / "a.txt").rename(root / "b.txt")
    renamed = hash_path(root, "set/")["sha256"]
    (root / "b.txt").write_bytes(b"other")
    edited = hash_path(root, "set/")["sha256"]

    assert len({before, renamed, edited}) == 3


def test_the_section_totals_the_paths_and_marks_missing_ones(tmp_path: Path) -> None:
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "x.bin").write_bytes(b"12345")
    (tmp_path / "labels.csv").write_bytes(b"abc")

    section = hash_data(["train", "labels.csv", "gone"], tmp_path, workers=2)

    assert [entry["path"] for entry in section["paths"]] == ["train/", "labels.csv", "gone"]
    assert (section["bytes"], section["files"], section["hashed"]) == (8, 2, True)
    assert section["paths"][2] == {"path": "gone", "sha256": None, "bytes": 0, "files": 0,
                                   "error": "does not exist"}


def test_labels_are_relative_never_absolute_host_paths(tmp_path: Path) -> None:
    base = tmp_path / "project"
    (base / "data").mkdir(parents=True)
    (tmp_path / "shared").mkdir()

    assert data_label(base / "data", base) == "data/"
    assert data_label(base, base) == "./"
    assert data_label(base / "data" / "missing.csv", base) == "data/missing.csv"
    assert data_label(tmp_path / "shared", base) == "../shared/"
