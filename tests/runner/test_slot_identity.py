"""Who a slot's engine runs as: the user and subordinate ID range derived from the slot, and the
one-line refusals when the host has no such user or it is root."""

from __future__ import annotations

import pwd
from pathlib import Path

import pytest
from helpers.runner_files import token_file, write_config

from repro_gate.errors import ConfigError
from repro_gate.runner.runner_config import (
    DEFAULT_SUBORDINATE_ID_BASE,
    SUBORDINATE_ID_COUNT,
    RunnerConfig,
    load_runner_config,
)
from repro_gate.runner.slot_folders import Owner
from repro_gate.runner.slot_identity import SlotIdentity
from repro_gate.runner.slots import Slot

SLOT = Slot(2, "GPU-7a9b0c1d-2e3f-4a5b-8c6d-7e8f9a0b1c2d", "NVIDIA H100 80GB HBM3")


def config(folder: Path, **top: object) -> RunnerConfig:
    github = {"repository": "octo-org/trainer", "auth": {"token_file": token_file(folder).name}}
    return load_runner_config(write_config(folder, github, **top))


def test_by_default_the_user_is_named_after_the_prefix_and_the_ids_follow_the_index(
    tmp_path: Path,
) -> None:
    identity = SlotIdentity.of(config(tmp_path, name_prefix="lab"), SLOT)

    assert identity.user == "lab-slot2"
    assert identity.subordinate_first == DEFAULT_SUBORDINATE_ID_BASE + 2 * SUBORDINATE_ID_COUNT
    assert identity.subordinate_last == identity.subordinate_first + SUBORDINATE_ID_COUNT - 1


def test_the_user_prefix_and_id_base_of_the_file_are_used(tmp_path: Path) -> None:
    isolation = {"user_prefix": "rg", "subordinate_id_base": 200_000}

    identity = SlotIdentity.of(config(tmp_path, isolation=isolation), SLOT)

    assert (identity.user, identity.subordinate_first) == ("rg2", 200_000 + 2 * 65536)


def test_ranges_of_neighbouring_slots_do_not_overlap(tmp_path: Path) -> None:
    effective = config(tmp_path)
    first, second = (SlotIdentity.of(effective, Slot(i, SLOT.uuid, SLOT.model)) for i in (0, 1))

    assert first.subordinate_last + 1 == second.subordinate_first


def test_a_user_setup_has_not_created_is_one_line_naming_setup() -> None:
    with pytest.raises(ConfigError) as missing:
        SlotIdentity("repro-gate-no-such-slot-user", 1_000_000_000).owner()

    assert str(missing.value) == (
        "slot user repro-gate-no-such-slot-user does not exist: run `repro-gate runner setup"
        " --config <runner.yml>` as root first")


def test_root_is_refused_and_an_unprivileged_user_gives_its_ids() -> None:
    nobody = pwd.getpwnam("nobody")

    with pytest.raises(ConfigError, match="slot user root is root: a slot needs an unprivileged"):
        SlotIdentity("root", 1_000_000_000).owner()
    assert SlotIdentity("nobody", 1_000_000_000).owner() == Owner(nobody.pw_uid, nobody.pw_gid)
