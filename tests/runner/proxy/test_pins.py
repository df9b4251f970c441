"""Bind sources pinned: opened beneath the work folder without following a link, and the create
body handed to the engine naming the pin; as root, the pin is the folder that was checked,
whatever is swapped in its place afterwards."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.slot_policies import host

from repro_gate.runner.proxy.pins import PinRefused, Pins, open_beneath, pinned


@pytest.fixture
def work(tmp_path: Path) -> Path:
    folder = tmp_path / "work"
    (folder / "data" / "inner").mkdir(parents=True)
    (folder / "data" / "file").write_text("checked")
    (folder / "link").symlink_to(folder / "data")
    (folder / "data" / "up").symlink_to("/etc")
    return folder


@pytest.mark.parametrize(("source", "opened"), [
    ("{work}", "."), ("{work}/data", "data"), ("{work}/data/inner", "data/inner"),
    ("{work}/data/file", "data/file"), ("{work}//data/./inner/", "data/inner")])
def test_a_path_inside_the_work_folder_without_links_opens(
    work: Path, source: str, opened: str
) -> None:
    descriptor = open_beneath(work, source.format(work=work))
    try:
        assert os.path.samefile(f"/proc/self/fd/{descriptor}", work / opened)
    finally:
        os.close(descriptor)


@pytest.mark.parametrize(("source", "reason"), [
    ("{work}/link", "'link' is a symbolic link"),
    ("{work}/link/inner", "'link' is a symbolic link"),
    ("{work}/data/up", "'up' is a symbolic link"),
    ("{work}/data/../../etc", "'..' is refused"),
    ("{work}/missing", "'missing' does not exist"),
    ("/etc", "not spelled inside the work folder"),
])
def test_a_link_a_parent_or_a_missing_name_on_the_way_is_refused(
    work: Path, source: str, reason: str
) -> None:
    with pytest.raises(PinRefused, match=reason):
        open_beneath(work, source.format(work=work))


def test_each_bind_source_is_replaced_by_its_pin_and_named_volumes_stay() -> None:
    body = {**host(Binds=["/w/a:/a:ro", "cache:/c", "/proxy.sock:/var/run/docker.sock"],
                   Mounts=[{"Type": "bind", "Source": "/w/b", "Target": "/b"},
                           {"Type": "volume", "Source": "v", "Target": "/v"}]),
            "Binds": ["/w/top:/t"]}

    rewritten = pinned(body, lambda source: f"/pins{source}")

    assert rewritten["HostConfig"] == {
        "Binds": ["/pins/w/a:/a:ro", "cache:/c", "/pins/proxy.sock:/var/run/docker.sock"],
        "Mounts": [{"Type": "bind", "Source": "/pins/w/b", "Target": "/b"},
                   {"Type": "volume", "Source": "v", "Target": "/v"}]}
    assert rewritten["Binds"] == ["/pins/w/top:/t"]


@pytest.mark.skipif(os.geteuid() != 0, reason="a pin is a bind mount: root only")
def test_a_pin_is_the_checked_folder_whatever_is_swapped_in_afterwards(
    work: Path, tmp_path: Path
) -> None:
    proxy = tmp_path / "proxy.sock"
    pins = Pins(tmp_path / "pins", work, frozenset({proxy}))
    pins.prepare()
    try:
        pin = Path(pins.pin(str(work / "data")))
        (work / "data").rename(work / "moved")
        (work / "data").symlink_to("/etc")

        assert sorted(os.listdir(pin)) == ["file", "inner", "up"]
        assert pin.parent == tmp_path / "pins"
        assert pins.pin(str(proxy)) == str(proxy)
        pins.release_all()
        assert list((tmp_path / "pins").iterdir()) == []
    finally:
        pins.close()
    assert not os.path.ismount(tmp_path / "pins")
