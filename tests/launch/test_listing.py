"""A folder seen with every listing reversed (disorderfs), read-only, and unmounted afterwards.
Needs /dev/fuse and disorderfs (scripts/test installs it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from repro_gate.launch import listing

pytestmark = pytest.mark.skipif(listing.refusal() is not None, reason=str(listing.refusal()))


def test_every_listing_is_reversed_and_nothing_can_be_written(tmp_path: Path) -> None:
    folder, mount_point = tmp_path / "project", tmp_path / "seen"
    (folder / "shards").mkdir(parents=True)
    for index in range(6):
        (folder / "shards" / f"shard-{index}.pt").write_text(str(index))
    mount_point.mkdir()

    with listing.reversed_listings(folder, mount_point) as seen:
        listed = os.listdir(seen / "shards")
        assert listed == list(reversed(os.listdir(folder / "shards")))
        assert (seen / "shards" / "shard-3.pt").read_text() == "3"
        with pytest.raises(OSError):
            (seen / "new.txt").write_text("x")

    assert os.listdir(mount_point) == []  # unmounted
    assert not (folder / "new.txt").exists()
