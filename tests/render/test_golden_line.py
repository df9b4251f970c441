"""The golden comparison in one line, as every report gives it, from `comparison.golden`
sections valid against the manifest schema."""

from __future__ import annotations

import copy
import json
from typing import Any

from helpers.paths import MANIFEST_FAIL

from repro_gate import validation
from repro_gate.render.golden_line import (
    candidate_sentence,
    golden_line,
    golden_of,
    numerics_changed_only,
    numerics_markdown,
)

PATH = ".repro-gate/golden/a10g.json"
BLESS = "repro-gate golden bless"


def golden(status: str, **fields: Any) -> dict[str, Any]:
    section: dict[str, Any] = {
        "status": status, "path": PATH, "machine_class": "a10g", "golden_machine_class": "a10g",
        "bless_command": BLESS, "software_diff": [], "steps_compared": 8,
        "artifacts_compared": 1, "first_divergence": None, "largest_difference": None,
        "loss_delta": [], "attribution": None, "against_base": None,
    }
    section.update(fields)
    return section


def manifest_with(section: dict[str, Any] | None, **fields: Any) -> dict[str, Any]:
    document = copy.deepcopy(json.loads(MANIFEST_FAIL.read_text(encoding="utf-8")))
    document["comparison"]["golden"] = section
    document.update(fields)
    assert validation.errors("manifest", document) == []
    return document


def test_no_comparison_gives_no_line() -> None:
    assert golden_line(None) is None
    assert golden_of(manifest_with(None)) is None
    assert numerics_markdown(manifest_with(None)) == ""


def test_unchanged_numerics_name_the_file() -> None:
    assert golden_line(golden("same")) == f"numerics unchanged against `{PATH}`"


def test_a_change_says_where_it_starts_and_what_caused_it() -> None:
    section = golden("changed",
                     first_divergence={"step": 4, "cause": "forward", "detail": "module fc"},
                     attribution={"kind": "environment", "reason": "torch differs"})
    assert golden_line(section) == (
        f"numerics changed against `{PATH}` at step 4 (forward), caused by the environment")


def test_an_unknown_cause_gives_its_reason() -> None:
    section = golden("changed", attribution={"kind": "unknown", "reason": "no fingerprint"})
    assert golden_line(section) == (
        f"numerics changed against `{PATH}`, cause unknown: no fingerprint")


def test_a_difference_before_the_first_step_gives_its_detail() -> None:
    divergence = {"step": 0, "cause": "initialization", "detail": "initial parameters differ"}
    section = golden("within_tolerance", first_divergence=divergence)
    assert golden_line(section) == (
        f"numerics within tolerance of `{PATH}` (initial parameters differ)")


def test_a_golden_file_from_another_machine_class_is_said() -> None:
    line = golden_line(golden("same", golden_machine_class="h100"))
    assert line == f"numerics unchanged against `{PATH}` (recorded on `h100`, this run on `a10g`)"


def test_the_base_branchs_file_follows() -> None:
    base = {"path": "golden/base.json", "status": "within_tolerance", "first_divergence": None,
            "largest_difference": None, "loss_delta": []}
    line = golden_line(golden("same", against_base=base))
    assert line == (f"numerics unchanged against `{PATH}`; against the base branch's"
                    " `golden/base.json`: within tolerance")


def test_renamed_tensors_are_named_with_what_they_break() -> None:
    renamed = [{"golden": f"fc.{n}", "run": f"proj.{n}"} for n in ("weight", "bias", "x", "y")]
    section = golden("same", renamed=renamed)
    manifest_with(section)  # valid against the manifest schema
    assert golden_line(section) == (
        f"numerics unchanged against `{PATH}`; tensors renamed (fc.weight -> proj.weight,"
        " fc.bias -> proj.bias, fc.x -> proj.x and 1 more): checkpoints saved under the old"
        " names will not load with `load_state_dict(strict=True)`")
    assert golden_line(golden("same", renamed=[])) == f"numerics unchanged against `{PATH}`"


def test_no_golden_file_says_how_to_create_one() -> None:
    assert golden_line(golden("no_golden", path=".repro-gate/golden")) == (
        "no golden trajectory for machine class `a10g` in `.repro-gate/golden`: create it with"
        f" `{BLESS}`")


def test_the_paragraph_adds_where_this_runs_golden_file_was_written() -> None:
    section = golden("changed", candidate="out/golden/a10g.json")
    text = numerics_markdown(manifest_with(section))
    assert text.startswith(f"**Numerics:** numerics changed against `{PATH}`\n\n")
    assert "This run's golden file is `out/golden/a10g.json`" in text
    assert text.endswith(f"or run `{BLESS}`.")
    assert candidate_sentence(golden("same")) == ""


def test_a_fail_on_the_golden_comparison_alone_is_told_apart() -> None:
    numerics = {"code": "numerics_changed", "message": "numerics changed"}
    equal = {"code": "bitwise_equal", "message": "equal"}
    diverged = {"code": "trajectory_diverged", "message": "diverged"}
    assert numerics_changed_only({"verdict": "fail", "reasons": [numerics, equal]})
    assert not numerics_changed_only({"verdict": "fail", "reasons": [numerics, diverged]})
    assert not numerics_changed_only({"verdict": "pass", "reasons": [equal]})
    assert not numerics_changed_only({"verdict": "fail", "reasons": [equal]})
