"""Comparing files by sha256: the digest streamed in chunks, and the `bytes` comparison."""

from __future__ import annotations

import hashlib
from pathlib import Path

from repro_gate.compare.files import CHUNK_BYTES, compare_bytes, sha256_file


def test_the_digest_of_a_file_larger_than_a_chunk_is_hashlib_s(tmp_path: Path) -> None:
    data = bytes(range(256)) * (CHUNK_BYTES // 256 * 2 + 3)
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    assert len(data) > 2 * CHUNK_BYTES
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()
    (tmp_path / "empty").write_bytes(b"")
    assert sha256_file(tmp_path / "empty") == hashlib.sha256(b"").hexdigest()


def test_equal_bytes_are_equal_and_carry_both_digests(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"vocab\n")
    (tmp_path / "b").write_bytes(b"vocab\n")
    result = compare_bytes(tmp_path / "a", tmp_path / "b", "vocab.txt")
    digest = hashlib.sha256(b"vocab\n").hexdigest()
    assert result == {"path": "vocab.txt", "kind": "bytes", "status": "equal",
                      "sha256_a": digest, "sha256_b": digest}


def test_one_differing_byte_is_different_and_the_note_is_kept(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"\x00\x01")
    (tmp_path / "b").write_bytes(b"\x00\x02")
    result = compare_bytes(tmp_path / "a", tmp_path / "b", "blob", note="compared by bytes")
    assert result["status"] == "different"
    assert result["sha256_a"] != result["sha256_b"]
    assert result["note"] == "compared by bytes"
