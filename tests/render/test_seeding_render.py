"""What the gate supplied, in every report: the unseeded sentence, "seeded by the gate (seed N)"
and the closing "to reproduce outside the gate" lines, from a real-shaped manifest."""

from __future__ import annotations

import copy
import json
from typing import Any

from helpers.paths import MANIFEST_FAIL

from repro_gate import validation
from repro_gate.gate import verdict
from repro_gate.render import console, markdown

FIXTURE = MANIFEST_FAIL
UNSEEDED = ("the initial parameters differ between runs det-1 and det-2: torch was never seeded:"
            " add `torch.manual_seed(0)` before train.py:21, where the first parameter is created")


def fixture() -> dict[str, Any]:
    return copy.deepcopy(json.loads(FIXTURE.read_text(encoding="utf-8")))


def unseeded_failure(**anchor: Any) -> dict[str, Any]:
    manifest = fixture()
    manifest["config"].pop("seed")
    divergence = manifest["comparison"]["first_divergence"]
    divergence.update(cause="initialization", step=1,
                      unseeded={"generators": ["torch"], "seeded_late": False, **anchor})
    manifest["reasons"] = verdict.failures(manifest["comparison"], [])
    assert validation.errors("manifest", manifest) == []
    return manifest


def test_every_report_names_what_is_unseeded_and_the_line_to_add() -> None:
    manifest = unseeded_failure(file="train.py", line=21)
    assert manifest["reasons"][0]["message"] == UNSEEDED
    assert console.render(manifest, None).splitlines()[1] == f"  {UNSEEDED}"
    assert f"**Why:** {UNSEEDED}" in markdown.comment_markdown(manifest)
    assert f"- `trajectory_diverged`: {UNSEEDED}" in markdown.summary_markdown(manifest)


def test_a_training_that_seeds_after_building_its_model_is_told_to_move_the_call() -> None:
    manifest = unseeded_failure(file="train.py", line=21, seeded_late=True)
    assert manifest["reasons"][0]["message"].endswith(
        ": torch is seeded only after the first parameter was created: move"
        " `torch.manual_seed(0)` before train.py:21, where the first parameter is created")


def test_without_a_known_first_parameter_the_sentence_says_before_the_model() -> None:
    manifest = unseeded_failure()
    assert manifest["reasons"][0]["message"].endswith(
        "torch was never seeded: add `torch.manual_seed(0)` before the model is built")


def test_a_gate_seeded_run_says_so_and_ends_with_the_lines_that_reproduce_it() -> None:
    manifest = fixture()  # seed 1234 configured: the gate seeded
    lines = console.render(manifest, "out/manifest.json").splitlines()
    note = "seeded by the gate (seed 1234)"
    assert f"  {note}" in lines
    closing = lines[lines.index("  to reproduce outside the gate:"):]
    assert closing == [
        "  to reproduce outside the gate:",
        "    export CUBLAS_WORKSPACE_CONFIG=:4096:8",
        "    torch.use_deterministic_algorithms(True, warn_only=True)",
        "    torch.backends.cudnn.deterministic = True",
        "    torch.backends.cudnn.benchmark = False",
        "    random.seed(1234)",
        "    numpy.random.seed(1234)",
        "    torch.manual_seed(1234)",
    ]
    block = "\n".join(line.strip() for line in closing[1:])
    for text in (markdown.summary_markdown(manifest), markdown.comment_markdown(manifest),
                 markdown.details_markdown(manifest)):
        assert f"**To reproduce outside the gate:**\n\n```\n{block}\n```\n" in text
    assert note in markdown.summary_markdown(manifest)
    assert note in markdown.comment_markdown(manifest)


def test_only_the_settings_the_training_lacks_are_listed() -> None:
    manifest = fixture()
    for setting in manifest["fingerprint"]["random"]["seeding"]["settings"]:
        setting["set_by_training"] = setting["name"] != "CUBLAS_WORKSPACE_CONFIG"
    assert validation.errors("manifest", manifest) == []
    lines = console.render(manifest, None).splitlines()
    assert lines[-2:] == ["  to reproduce outside the gate:",
                          "    export CUBLAS_WORKSPACE_CONFIG=:4096:8"]
    for setting in manifest["fingerprint"]["random"]["seeding"]["settings"]:
        setting["set_by_training"] = True
    assert console.render(manifest, None).splitlines()[-1] == (
        "  to reproduce outside the gate: nothing to add: the training sets every setting the"
        " gate applies")
