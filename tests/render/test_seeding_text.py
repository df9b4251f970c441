"""What the gate supplied, in words: the seed note and the lines that reproduce a run outside
the gate, read from a real-shaped manifest."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from helpers.paths import MANIFEST_FAIL

from repro_gate.render.seeding_text import gate_seed_note, reproduce


def fixture() -> dict[str, Any]:
    return copy.deepcopy(json.loads(MANIFEST_FAIL.read_text(encoding="utf-8")))


def test_a_configured_seed_is_named() -> None:
    assert gate_seed_note(fixture()) == "seeded by the gate (seed 1234)"
    assert gate_seed_note({"config": {"seed": 0}}) == "seeded by the gate (seed 0)"


@pytest.mark.parametrize("config", [{}, {"seed": None}, {"seed": True}, {"seed": "7"}, None])
def test_no_integer_seed_gives_no_note(config: Any) -> None:
    assert gate_seed_note({"config": config}) == ""


def test_the_lines_are_the_settings_the_training_lacks_in_order() -> None:
    manifest = fixture()
    settings = manifest["fingerprint"]["random"]["seeding"]["settings"]
    for setting in settings:
        setting["set_by_training"] = setting["name"] in ("CUBLAS_WORKSPACE_CONFIG", "seed_numpy")
    assert reproduce(manifest) == [
        "torch.use_deterministic_algorithms(True, warn_only=True)",
        "torch.backends.cudnn.deterministic = True",
        "torch.backends.cudnn.benchmark = False",
        "random.seed(1234)",
        "torch.manual_seed(1234)",
    ]


def test_a_setting_the_gate_did_not_apply_is_not_listed() -> None:
    manifest = fixture()
    for setting in manifest["fingerprint"]["random"]["seeding"]["settings"]:
        setting["applied_by_gate"] = setting["name"] == "seed_torch"
    assert reproduce(manifest) == ["torch.manual_seed(1234)"]


def test_a_training_that_sets_everything_has_nothing_to_add() -> None:
    manifest = fixture()
    for setting in manifest["fingerprint"]["random"]["seeding"]["settings"]:
        setting["set_by_training"] = True
    assert reproduce(manifest) == []


def test_a_manifest_without_a_seeding_record_says_nothing() -> None:
    manifest = fixture()
    del manifest["fingerprint"]["random"]["seeding"]
    assert reproduce(manifest) is None
    assert reproduce({"verdict": "error"}) is None
    assert reproduce({"fingerprint": {"random": {"seeding": {"settings": []}}}}) is None
