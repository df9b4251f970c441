"""The evidence sections of the summary and the comment, from a real-shaped manifest: reasons,
the first divergence, the artifacts and ops tables, and the folded optional sections."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from helpers.paths import MANIFEST_FAIL

from repro_gate.render.markdown_evidence import evidence
from repro_gate.render.markdown_text import TABLE_ROWS

WORKSPACE = "/github/workspace"  # where the fixture's training ran


@pytest.fixture(autouse=True)
def in_the_workspace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_WORKSPACE", WORKSPACE)


def fixture() -> dict[str, Any]:
    return copy.deepcopy(json.loads(MANIFEST_FAIL.read_text(encoding="utf-8")))


def part(manifest: dict[str, Any], heading: str) -> str:
    found = [text for text in evidence(manifest) if text.startswith(heading)]
    assert len(found) == 1, heading
    return found[0]


def test_reasons_keep_their_codes() -> None:
    assert part(fixture(), "**Reasons**").splitlines()[2:] == [
        "- `trajectory_diverged`: runs det-1 and det-2 diverge at step 3 (fc.weight, fc.bias)",
        "- `artifact_different`: 2 of 3 artifacts differ between det-1 and det-2",
    ]


def test_the_first_divergence_names_step_parameters_and_runs() -> None:
    manifest = fixture()
    manifest["comparison"]["first_divergence"]["loss_differs"] = True
    assert part(manifest, "**First divergence of runs A and B:**") == (
        "**First divergence of runs A and B:** step 3, parameters fc.weight, fc.bias (runs"
        " `det-1` and `det-2`); the loss differs too")


def test_the_evidence_behind_a_cause_is_listed_names_of_code_as_code() -> None:
    manifest = fixture()
    manifest["comparison"]["first_divergence"].update(cause="forward", module="body.1")
    text = part(manifest, "**First divergence of runs A and B:**")
    assert text.endswith("\n\n- cause: `forward`\n- module: `body.1`")


def test_the_artifacts_table_summarises_each_artifact() -> None:
    rows = part(fixture(), "| Artifact |").splitlines()[2:]
    assert rows == [
        "| `checkpoints/model.safetensors` | safetensors | ❌ different | 2 of 3 tensors differ,"
        " max abs diff 2.38e-07 |",
        "| `metrics.json` | json | ❌ different | 1 of 2 keys differ: final_loss |",
        "| `vocab.txt` | bytes | ✅ equal |  |",
    ]


def test_ignored_fields_join_the_detail_cell() -> None:
    manifest = fixture()
    manifest["comparison"]["artifacts"][2]["ignored"] = [
        {"key": f"k{i}", "differs": i == 1} for i in range(5)]
    rows = part(manifest, "| Artifact |").splitlines()
    assert rows[-1] == "| `vocab.txt` | bytes | ✅ equal | not compared: k0, k1 (differs), k2, k3" \
                       " +1 more |"


def test_an_op_inside_the_workspace_is_shown_relative_to_it() -> None:
    rows = part(fixture(), "**Nondeterministic ops**").splitlines()[4:]
    assert rows[0] == "| `index_add_cuda_` | `model.py:88` | 40 | nondeterministic_op |"
    assert rows[1].startswith("| `scaled_dot_product_attention` | `/opt/conda/lib/")


def test_many_ops_are_cut_with_a_count() -> None:
    manifest = fixture()
    manifest["nondeterministic_ops"] = [
        {"op": f"op{i}", "file": None, "line": None, "count": 1, "kind": "nondeterministic_op"}
        for i in range(TABLE_ROWS + 3)]
    text = part(manifest, "**Nondeterministic ops**")
    assert text.count("| `unknown` |") == TABLE_ROWS
    assert text.endswith("\n\n…and 3 more ops.")


def test_the_fingerprint_is_folded_under_its_heading() -> None:
    text = part(fixture(), "<details><summary>Fingerprint</summary>")
    assert "| commit | 2f9c1e0b7a6d |" in text
    assert "| seed | 1234 (seeded by the gate) |" in text
    assert "| GPUs | 1 x NVIDIA A10G |" in text
    assert text.endswith("\n\n</details>")


def test_gpus_are_counted_by_name() -> None:
    manifest = fixture()
    gpu = manifest["fingerprint"]["hardware"]["gpus"][0]
    manifest["fingerprint"]["hardware"]["gpus"] = [gpu, gpu, {**gpu, "name": None}]
    manifest["fingerprint"]["random"]["seed"] = None
    text = part(manifest, "<details><summary>Fingerprint</summary>")
    assert "| GPUs | 2 x NVIDIA A10G, 1 x unnamed GPU |" in text
    assert "| seed | none from the gate |" in text


def test_checklist_items_that_need_work_carry_their_fix() -> None:
    text = part(fixture(), "<details><summary>Checklist</summary>")
    assert "- ✅ **cuBLAS workspace config**: CUBLAS_WORKSPACE_CONFIG=:4096:8 is set\n" in text
    assert ("- ❌ **Deterministic algorithms**: index_add_cuda_ at model.py:88 has no"
            " deterministic implementation Fix: replace index_add_ with a scatter over sorted"
            " indices") in text


def test_the_environment_diff_lists_changes_or_says_there_are_none() -> None:
    manifest = fixture()
    text = part(manifest, "<details><summary>Environment diff")
    assert "- env: torch 2.4.1+cu124 -> 2.5.1+cu124" in text
    manifest["environment_diff"]["equal"] = True
    assert "No difference from the baseline's environment." in part(
        manifest, "<details><summary>Environment diff")


def test_optional_sections_absent_from_the_manifest_are_left_out() -> None:
    manifest = fixture()
    for key in ("fingerprint", "checklist", "environment_diff"):
        del manifest[key]
    manifest["nondeterministic_ops"] = []
    assert not any(text.startswith("<details") for text in evidence(manifest))
    assert not any(text.startswith("**Nondeterministic ops**") for text in evidence(manifest))
