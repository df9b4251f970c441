"""Finding the gate's own container and mapping its paths to host paths (no daemon needed)."""

from __future__ import annotations

from pathlib import Path

from repro_gate.launch.host_paths import PathTranslator, own_container_id

CONTAINER = "3f" * 32
MOUNTINFO = f"""\
620 540 0:62 / / rw,relatime master:250 - overlay overlay rw,lowerdir=/var/lib/docker/overlay2/l/X
641 620 254:1 /var/lib/docker/containers/{CONTAINER}/resolv.conf /etc/resolv.conf rw - ext4 /dev/vda
642 620 254:1 /var/lib/docker/containers/{CONTAINER}/hostname /etc/hostname rw - ext4 /dev/vda
643 620 254:1 /home/runner/_work/repo/repo /github/workspace rw - ext4 /dev/vda
"""


def test_own_container_id_comes_from_mountinfo(tmp_path: Path) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(MOUNTINFO)

    assert own_container_id(mountinfo) == CONTAINER


def test_another_containers_mounts_on_the_host_are_not_taken_for_our_own(tmp_path: Path) -> None:
    # A dockerd sharing the host's mount namespace leaves its containers' mounts in every
    # process's mountinfo: only /etc/hostname, /etc/hosts and /etc/resolv.conf say "ours".
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(
        "25 1 0:22 / / rw - ext4 /dev/vda rw\n"
        f"300 25 0:70 / /var/lib/docker/containers/{CONTAINER}/mounts/shm rw - tmpfs shm rw\n")

    assert own_container_id(mountinfo, dockerenv=tmp_path / "no-dockerenv") is None


def test_paths_map_through_the_longest_mount() -> None:
    translator = PathTranslator([
        ("/github/workspace", "/home/runner/_work/repo/repo"),
        ("/github/workspace/out", "/mnt/fast/out"),
        ("/github/home", "/home/runner/_work/_temp/_github_home"),
    ])

    assert translator.host_path(Path("/github/workspace")) == "/home/runner/_work/repo/repo"
    assert translator.host_path(Path("/github/workspace/src/a.py")) == (
        "/home/runner/_work/repo/repo/src/a.py"
    )
    assert translator.host_path(Path("/github/workspace/out/runs/A")) == "/mnt/fast/out/runs/A"
    assert translator.host_path(Path("/github/workspaces")) is None
    assert translator.host_path(Path("/usr/local/lib/python3.12")) is None


def test_on_the_host_paths_are_their_own_host_paths() -> None:
    assert PathTranslator(None).host_path(Path("/srv/ws/runs/A")) == "/srv/ws/runs/A"

