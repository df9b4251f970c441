"""Names spelled like a mistyped one: one "did you mean" when a name is close, the nearest
names however far."""

from __future__ import annotations

from repro_gate.suggestions import did_you_mean, nearest

KEYS = ["artifacts", "tolerance", "timeout", "gpus", "golden"]


def test_a_close_name_is_offered() -> None:
    assert did_you_mean("tolerence", KEYS) == " (did you mean 'tolerance'?)"
    assert did_you_mean("artifact", KEYS) == " (did you mean 'artifacts'?)"
    assert did_you_mean("--artifact", ["--artifacts", "--json"]) == (
        " (did you mean '--artifacts'?)")


def test_a_name_far_from_all_gets_no_guess() -> None:
    assert did_you_mean("bogus", KEYS) == ""
    assert did_you_mean("epochs", KEYS) == ""
    assert did_you_mean("anything", []) == ""


def test_the_nearest_names_come_closest_first_however_far() -> None:
    files = ["logs/train.log", "ckpt/model.pth", "ckpt/optim.pth", "metrics.json"]

    assert nearest("checkpoints/*.pt", files, 2) == ["ckpt/optim.pth", "ckpt/model.pth"]
    assert nearest("zzz", ["b", "a"], 5) == ["a", "b"]  # equally far: in sorted order
    assert nearest("x", [], 5) == []
