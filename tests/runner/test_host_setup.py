"""`runner setup` up to where it would change the host: who may run it, what it leaves alone
on the shared engine, and the checks that stop it before any change (a missing launcher, a
work root other users cannot pass, subordinate IDs another user holds)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.runner_files import SLOT_UUIDS, token_file, write_config

from repro_gate.errors import ConfigError
from repro_gate.runner.host_setup import _check_free, _check_passable, _ranges, set_up
from repro_gate.runner.runner_config import RunnerConfig, load_runner_config
from repro_gate.runner.slot_identity import SlotIdentity
from repro_gate.runner.slots import Slot

SLOTS = [Slot(index, uuid, "NVIDIA H100 80GB HBM3") for index, uuid in enumerate(SLOT_UUIDS)]
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="set_up refuses anyone but root")


def config(folder: Path, **isolation: object) -> RunnerConfig:
    github = {"repository": "octo-org/trainer", "auth": {"token_file": token_file(folder).name}}
    return load_runner_config(write_config(folder, github, work_root=str(folder / "work"),
                                           isolation=isolation))


@as_root
def test_the_shared_engine_has_no_slot_users_to_set_up(tmp_path: Path) -> None:
    said: list[str] = []

    changes = set_up(config(tmp_path, engine="shared"), SLOTS, said.append)

    assert changes == 0
    assert said == ["isolation.engine is shared: no slot users to set up"]
    assert not (tmp_path / "work").exists()


@as_root
def test_a_missing_launcher_stops_setup_before_any_change(tmp_path: Path) -> None:
    said: list[str] = []

    with pytest.raises(ConfigError) as refused:
        set_up(config(tmp_path, engine_command="no-such-launcher.sh"), SLOTS, said.append)

    assert str(refused.value).startswith("isolation.engine_command no-such-launcher.sh: not found")
    assert said == []
    assert not (tmp_path / "work").exists()


def test_a_work_root_under_a_closed_folder_is_refused(tmp_path: Path) -> None:
    closed = tmp_path / "closed"
    closed.mkdir(mode=0o700)
    closed.chmod(0o700)

    with pytest.raises(ConfigError) as refused:
        _check_passable(closed / "runner")
    _check_passable(Path("/var/lib/repro-gate-absent/runner"))  # folders not made yet pass

    assert str(refused.value).startswith(f"work_root {closed / 'runner'}: {closed} is closed"
                                         " to other users (mode 0700)")


def test_subordinate_ranges_are_read_and_an_overlap_with_another_user_is_refused(
    tmp_path: Path,
) -> None:
    subuid = tmp_path / "subuid"
    subuid.write_text("ubuntu:100000:65536\nbuilder:1000070000:1000\n# comment\nbad:line\n"
                      "repro-gate-slot0:1000000000:65536\n")
    slot0 = SlotIdentity("repro-gate-slot0", 1_000_000_000)
    slot1 = SlotIdentity("repro-gate-slot1", 1_000_065_536)

    _check_free(slot0, subuid)  # its own range is no conflict
    with pytest.raises(ConfigError) as refused:
        _check_free(slot1, subuid)

    assert _ranges(subuid) == {"ubuntu": [(100000, 65536)], "builder": [(1000070000, 1000)],
                               "repro-gate-slot0": [(1000000000, 65536)]}
    assert str(refused.value) == (
        f"runner setup: {subuid}: builder already has 1000070000-1000070999, which overlaps"
        " slot user repro-gate-slot1's 1000065536-1000131071 (set isolation.subordinate_id_base)")
