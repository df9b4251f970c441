"""What the reset removes from a stopped engine's data root, on a data root laid out as Docker
20.10 lays out its own (overlay2): what a job made goes, the image store stays, and nothing a
job planted there leads the removal outside the data root."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from repro_gate.runner.engine_data import empty_job_state

IMAGE_LAYER = "a" * 64
CONTAINER_LAYER = "b" * 64


def data_root(folder: Path) -> Path:
    """An engine's data root after a job: an image with one layer, a container with its
    writable and init layers, a volume, a network, a build cache."""
    data = folder / "data"
    for made in ("containers/c1", "volumes/cache/_data", "network/files", "buildkit",
                 "image/overlay2/layerdb/sha256/chain1", "image/overlay2/imagedb/content",
                 "image/overlay2/layerdb/mounts/c1", f"overlay2/{IMAGE_LAYER}/diff",
                 f"overlay2/{CONTAINER_LAYER}/diff", f"overlay2/{CONTAINER_LAYER}-init/diff",
                 "overlay2/l"):
        (data / made).mkdir(parents=True)
    (data / "image/overlay2/layerdb/sha256/chain1/cache-id").write_text(IMAGE_LAYER)
    (data / "image/overlay2/repositories.json").write_text("{}")
    (data / "image/overlay2/layerdb/mounts/c1/mount-id").write_text(CONTAINER_LAYER)
    (data / "network/files/local-kv.db").write_text("networks")
    (data / "overlay2/l/IMAGELINK").symlink_to(f"../{IMAGE_LAYER}/diff")
    (data / "overlay2/l/CONTAINERLINK").symlink_to(f"../{CONTAINER_LAYER}/diff")
    return data


def tree(data: Path) -> set[str]:
    return {str(path.relative_to(data)) for path in data.rglob("*")}


def test_what_a_job_made_goes_and_the_image_store_stays(tmp_path: Path) -> None:
    data = data_root(tmp_path)

    removed = empty_job_state(data, keep_volumes=False)

    assert set(removed) == {"containers", "volumes", "network", "buildkit",
                            "image/overlay2/layerdb/mounts", f"overlay2/{CONTAINER_LAYER}",
                            f"overlay2/{CONTAINER_LAYER}-init"}
    assert tree(data) == {
        "image", "image/overlay2", "image/overlay2/repositories.json",
        "image/overlay2/imagedb", "image/overlay2/imagedb/content", "image/overlay2/layerdb",
        "image/overlay2/layerdb/sha256", "image/overlay2/layerdb/sha256/chain1",
        "image/overlay2/layerdb/sha256/chain1/cache-id", "overlay2",
        f"overlay2/{IMAGE_LAYER}", f"overlay2/{IMAGE_LAYER}/diff", "overlay2/l",
        "overlay2/l/IMAGELINK"}


def test_volumes_stay_when_kept_caches_are_to_be_judged_by_the_engine(tmp_path: Path) -> None:
    data = data_root(tmp_path)

    empty_job_state(data, keep_volumes=True)

    assert (data / "volumes/cache/_data").is_dir()
    assert not (data / "containers").exists()


def test_links_a_job_planted_are_removed_never_followed(tmp_path: Path) -> None:
    outside = tmp_path / "host"
    (outside / "keep").mkdir(parents=True)
    data = data_root(tmp_path)
    (data / "buildkit").rmdir()
    (data / "buildkit").symlink_to(outside)
    (data / f"overlay2/{'c' * 64}").symlink_to(outside)
    (data / "overlay2/l/ESCAPE").symlink_to(outside / "keep")

    empty_job_state(data, keep_volumes=False)

    assert (outside / "keep").is_dir()
    assert not os.path.lexists(data / "buildkit")
    assert not os.path.lexists(data / f"overlay2/{'c' * 64}")
    assert not os.path.lexists(data / "overlay2/l/ESCAPE")


def test_a_data_root_that_is_a_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere" / "containers").mkdir(parents=True)
    (tmp_path / "data").symlink_to(tmp_path / "elsewhere")

    with pytest.raises(OSError):
        empty_job_state(tmp_path / "data", keep_volumes=False)
    assert (tmp_path / "elsewhere" / "containers").is_dir()
