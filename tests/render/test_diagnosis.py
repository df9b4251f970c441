"""The first divergence said so a person can act: the cause in one sentence, everywhere it shows.

Each manifest is a failing gate's (tests/fixtures/github/manifest-fail.json) with the first
divergence of one cause; its reasons are written by the gate's own `verdict.failures`, and it is
valid against the manifest schema before anything is rendered from it.
"""

from __future__ import annotations

import copy
import io
import json
from typing import Any

import pytest
from helpers.paths import MANIFEST_FAIL

from repro_gate import validation
from repro_gate.gate import verdict
from repro_gate.publish import actions
from repro_gate.render import console, markdown
from repro_gate.render.diagnosis import explain

FIXTURE = MANIFEST_FAIL
GRADIENTS = [f"layers.{i}.weight" for i in range(8)]

# cause -> (fields of the first divergence, sentence, title after "not reproducible · ")
CAUSES: dict[str, tuple[dict[str, Any], str, str]] = {
    "initialization": (
        {"step": 1, "initial_parameters": ["fc.weight", "fc.bias"]},
        "the initial parameters differ between runs det-1 and det-2 (fc.weight, fc.bias):"
        " the model is initialised from a source the gate cannot seed (os.urandom, time)",
        "initial parameters differ",
    ),
    "input": (
        {"step": 1},
        "at step 1 the input batch differs (runs det-1 and det-2): data order or augmentation"
        " is not seeded (DataLoader workers, directory listing, unseeded RNG)",
        "input batch differs at step 1",
    ),
    "forward": (
        {"step": 5, "module": "body.1", "localisation": {"status": "found", "run": "L"}},
        "runs det-1 and det-2 diverge at step 5 in the forward pass: module `body.1`"
        " (its inputs are equal, its output differs); look in its forward()",
        "forward pass diverges at step 5 (module body.1)",
    ),
    "backward": (
        {"step": 4, "gradients": GRADIENTS,
         "op": {"op": "index_add_cuda_", "file": "/ws/train.py", "line": 42}},
        "runs det-1 and det-2 diverge at step 4 in the backward pass: the gradients of"
        " layers.0.weight, layers.1.weight, layers.2.weight, layers.3.weight, layers.4.weight"
        " and 3 more differ while the loss is equal; nondeterministic op `index_add_cuda_` at"
        " train.py:42 ran in this step: it has no deterministic kernel: replace it with a"
        " deterministic alternative",
        "backward pass diverges at step 4 (op index_add_cuda_)",
    ),
    "optimizer": (
        {"step": 6, "gradients": []},
        "runs det-1 and det-2 diverge at step 6 in the optimizer step: the optimizer's update"
        " of fc.weight, fc.bias differs while the gradients are equal",
        "optimizer update diverges at step 6",
    ),
    "unknown": (
        {"step": 2, "loss_differs": None},
        "runs det-1 and det-2 diverge at step 2: fc.weight, fc.bias; cause unknown: no loss was"
        " recorded",
        "cause unknown at step 2",
    ),
}


@pytest.fixture(autouse=True)
def workspace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Op locations read relative to the repository, as in Actions."""
    monkeypatch.setenv("GITHUB_WORKSPACE", "/ws")


def failing(**divergence: Any) -> dict[str, Any]:
    """The fixture's failing manifest with this first divergence, its reasons as the gate writes
    them, checked against the manifest schema."""
    manifest = copy.deepcopy(json.loads(FIXTURE.read_text(encoding="utf-8")))
    comparison = manifest["comparison"]
    comparison["first_divergence"].update(divergence)
    manifest["reasons"] = verdict.failures(comparison, [])
    assert validation.errors("manifest", manifest) == []
    return manifest


def sentence_of(manifest: dict[str, Any]) -> str:
    (message,) = [r["message"] for r in manifest["reasons"] if r["code"] == "trajectory_diverged"]
    return message


@pytest.mark.parametrize("cause", list(CAUSES))
def test_each_cause_is_one_sentence_with_its_fix(cause: str) -> None:
    fields, expected, _ = CAUSES[cause]
    manifest = failing(cause=cause, **fields)
    message = sentence_of(manifest)
    assert message.startswith(expected)
    assert "\n" not in message and len(message) < 400
    assert message == explain(manifest["comparison"]["first_divergence"], multi_rank=False)


@pytest.mark.parametrize("cause", list(CAUSES))
def test_the_console_says_the_cause_in_its_first_lines(cause: str) -> None:
    fields, expected, _ = CAUSES[cause]
    manifest = failing(cause=cause, **fields)
    lines = console.render(manifest, "out/manifest.json").splitlines()
    assert lines[0] == "repro-gate: FAIL: not reproducible"
    assert lines[1].strip().startswith(expected)
    assert f"      cause: {cause}" in lines


@pytest.mark.parametrize("cause", list(CAUSES))
def test_check_run_summary_and_comment_say_the_cause(cause: str) -> None:
    fields, expected, title = CAUSES[cause]
    manifest = failing(cause=cause, **fields)
    assert markdown.title(manifest) == f"not reproducible · {title}"
    summary = markdown.summary_markdown(manifest)
    assert f"- `trajectory_diverged`: {expected}" in summary
    assert f"- cause: `{cause}`" in summary
    comment = markdown.comment_markdown(manifest)
    why = comment.index(f"**Why:** {expected}")
    assert comment.index("### ❌") < why < comment.index("| Verdict |")


def test_runs_with_different_hash_seeds_name_it_with_its_fix_where_it_can_be_the_cause(
) -> None:
    seeds = {"det-1": "0", "det-2": "1"}
    input_change = failing(cause="input", step=1, hash_seeds=seeds)
    backward = failing(cause="backward", **CAUSES["backward"][0], hash_seeds=seeds)

    clause = ("; runs det-1 and det-2 had different hash seeds (PYTHONHASHSEED 0 and 1): if the"
              " training numbers or orders anything by iterating a set of strings (a vocabulary,"
              " a list of files), iterate sorted, not a set")
    assert sentence_of(input_change) == CAUSES["input"][1] + clause
    assert "      hash seeds: 0 and 1" in console.render(input_change, None).splitlines()
    assert "hash seeds" not in sentence_of(backward)  # equal inputs and loss: not the hash seed
    unseeded = failing(cause="initialization", step=1, hash_seeds=seeds,
                       unseeded={"generators": ["torch"], "seeded_late": False})
    assert "hash seeds" not in sentence_of(unseeded)  # a cause already certain


def test_forward_names_the_module_everywhere() -> None:
    manifest = failing(cause="forward", **CAUSES["forward"][0])
    assert "      module: body.1" in console.render(manifest, None).splitlines()
    assert "- module: `body.1`" in markdown.summary_markdown(manifest)
    assert "- localisation: found (run L)" in markdown.comment_markdown(manifest)


def test_forward_without_a_module_says_where_to_look_or_why_it_is_not_known() -> None:
    not_found = failing(cause="forward", step=5, module=None,
                        localisation={"status": "not_found", "run": "L"})
    assert sentence_of(not_found).endswith(
        "in the forward pass: the loss differs while the model's inputs are equal; no module's"
        " output changed when re-executed: look at the training loop's code between the model"
        " and the loss"
    )
    failed = failing(cause="forward", step=5, module=None,
                     localisation={"status": "failed", "run": "L", "note": "run L exited with 1"})
    assert sentence_of(failed).endswith(
        "the loss differs while the model's inputs are equal; the run that locates the module"
        " failed: run L exited with 1"
    )
    assert "- localisation: failed (run L): run L exited with 1" in (
        markdown.summary_markdown(failed)
    )


def test_backward_lists_gradients_capped_and_the_op_of_the_step() -> None:
    manifest = failing(cause="backward", **CAUSES["backward"][0])
    text = console.render(manifest, None)
    assert "    gradients differ: layers.0.weight" in text and "and 3 more" in text
    assert "    nondeterministic op: index_add_cuda_ at train.py:42" in text
    summary = markdown.summary_markdown(manifest)
    assert "- nondeterministic op: `index_add_cuda_ at train.py:42`" in summary
    without_op = failing(cause="backward", step=4, gradients=["fc.weight"], op=None)
    assert sentence_of(without_op).endswith(
        "the gradients of fc.weight differ while the loss is equal; look for a custom autograd"
        " backward, or a kernel that torch.use_deterministic_algorithms(True) does not cover"
    )


def test_a_multi_rank_run_names_the_rank() -> None:
    manifest = failing(cause="input", step=3, rank=1)
    manifest["comparison"]["trajectory"]["ranks"] = 2
    manifest["reasons"] = verdict.failures(manifest["comparison"], [])
    assert validation.errors("manifest", manifest) == []
    assert sentence_of(manifest).startswith("rank 1's input differs at step 3 (runs det-1 and")
    assert "first divergence: rank 1, step 3" in console.render(manifest, None)
    assert markdown.title(manifest) == "not reproducible · input batch differs at step 3 on rank 1"
    assert "**First divergence of runs A and B:** step 3 on rank 1" in (
        markdown.summary_markdown(manifest))
    assert "| First divergence (runs A and B) | step 3 on rank 1 (fc.weight, fc.bias) |" in (
        markdown.comment_markdown(manifest)
    )
    forward = failing(cause="forward", step=5, rank=1, module="body.1")
    forward["comparison"]["trajectory"]["ranks"] = 2
    assert explain(forward["comparison"]["first_divergence"], multi_rank=True).startswith(
        "rank 1: runs det-1 and det-2 diverge at step 5 in the forward pass: module `body.1`"
    )


def test_a_manifest_without_a_cause_reads_as_before() -> None:
    manifest = failing()
    assert sentence_of(manifest) == "runs det-1 and det-2 diverge at step 3: fc.weight, fc.bias"
    assert markdown.title(manifest) == (
        "not reproducible · first divergence at step 3 (fc.weight +1 more)"
    )
    comment = markdown.comment_markdown(manifest)
    assert "**Why:**" not in comment and "- cause:" not in comment
    assert "    cause:" not in console.render(manifest, None)
    many = failing(parameters=[f"p{i}" for i in range(7)], loss_differs=True)
    assert sentence_of(many) == (
        "runs det-1 and det-2 diverge at step 3: p0, p1, p2, p3, p4 and 2 more"
    )


def test_fields_left_out_by_compare_ignore_show_in_every_report() -> None:
    manifest = failing(cause="input", step=1)
    metrics = manifest["comparison"]["artifacts"][1]
    metrics["ignored"] = [
        {"key": "finished_at", "differs": True, "a": "10:00", "b": "10:01"},
        {"key": "host", "differs": False},
    ]
    assert validation.errors("manifest", manifest) == []
    assert "        ignored (compare.ignore): finished_at (differs), host" in (
        console.render(manifest, None)
    )
    detail = "1 of 2 keys differ: final_loss; not compared: finished_at (differs), host |"
    assert detail in markdown.summary_markdown(manifest)
    assert detail in markdown.comment_markdown(manifest)
    details = markdown.details_markdown(manifest)
    assert "**Fields not compared (`compare.ignore`)**" in details
    assert "| `metrics.json` | `finished_at` | yes |" in details
    assert "| `metrics.json` | `host` | no |" in details


def test_the_actions_annotation_states_the_cause_at_the_ops_line() -> None:
    manifest = failing(cause="backward", **CAUSES["backward"][0])
    (line,) = actions.divergence_annotations(manifest, "/ws")
    assert line.startswith(
        "::error file=train.py,line=42,title=repro-gate%3A backward pass diverges at step 4"
        " (op index_add_cuda_)::runs det-1 and det-2 diverge at step 4 in the backward pass"
    )
    stream = io.StringIO()
    environ = {"GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": "/ws"}
    actions.publish(manifest, environ, stream=stream)
    assert stream.getvalue().splitlines()[0] == line
    assert actions.divergence_annotations(failing(), "/ws") == []  # no cause: no new annotation
