"""The runs that vary one factor of the environment, in every report: one table under a "vary"
heading with a fix per changed factor, from a real-shaped manifest valid against its schema."""

from __future__ import annotations

import copy
import json
from typing import Any

from helpers.paths import MANIFEST_FAIL

from repro_gate import validation
from repro_gate.render import console, markdown, vary_text

VARY = [
    {"factor": "threads", "status": "changed", "values": {"A": 2, "V": 1},
     "first_divergence": {"step": 1, "cause": "input", "parameters": ["w"]}, "artifacts": [],
     "note": ""},
    {"factor": "hostname", "status": "same", "values": {"A": "runner", "V": "elsewhere"},
     "first_divergence": None, "artifacts": [], "note": ""},
    {"factor": "path", "status": "changed", "values": {"A": "/w", "V": "/w/out/moved/w"},
     "first_divergence": None,
     "artifacts": [{"path": "model.pt", "status": "different", "tensors": [],
                    "keys": ["hparams.data_dir"]}], "note": ""},
    {"factor": "time", "status": "not_run", "values": {}, "first_divergence": None,
     "artifacts": [], "note": "libfaketime is not installed (the Debian package faketime)"},
    {"factor": "fileordering", "status": "error", "values": {}, "first_divergence": None,
     "artifacts": [], "note": "run V-fileordering exited with code 1"},
]


def portable_failure() -> dict[str, Any]:
    """A gate whose runs A and B agree, failed because two factors change the numbers."""
    manifest = copy.deepcopy(json.loads(MANIFEST_FAIL.read_text(encoding="utf-8")))
    comparison = manifest["comparison"]
    comparison.update(first_divergence=None, artifacts=[], vary=copy.deepcopy(VARY))
    manifest["reasons"] = [
        {"code": "not_portable", "message": vary_text.reason_text(comparison)},
        {"code": "bitwise_equal", "message": "2 deterministic runs are bitwise equal: 6 steps"}]
    assert validation.errors("manifest", manifest) == []
    return manifest


def test_the_reason_names_each_changed_factor_where_and_its_fix() -> None:
    manifest = portable_failure()

    assert manifest["reasons"][0]["message"] == (
        "the numbers change with threads (step 1, input batch differs): pin the thread count"
        " (torch.set_num_threads(N) and OMP_NUM_THREADS=N); with path (model.pt:"
        " hparams.data_dir): store relative paths (no absolute path in checkpoints or saved"
        " hyperparameters)")


def test_the_console_shows_one_line_per_factor_under_the_vary_heading() -> None:
    lines = console.render(portable_failure(), None).splitlines()

    assert lines[0] == "repro-gate: FAIL: reproducible here, but not portable"
    start = lines.index(f"  {vary_text.HEADING}:")
    assert lines[start + 1:start + 6] == [
        "    threads (A 2, V 1): changed at step 1, input batch differs; pin the thread count"
        " (torch.set_num_threads(N) and OMP_NUM_THREADS=N)",
        "    hostname (A runner, V elsewhere): same",
        "    path (A /w, V /w/out/moved/w): changed, model.pt: hparams.data_dir; store relative"
        " paths (no absolute path in checkpoints or saved hyperparameters)",
        "    time: not run; libfaketime is not installed (the Debian package faketime)",
        "    fileordering: error; run V-fileordering exited with code 1",
    ]


def test_the_comment_and_the_summary_hold_the_table() -> None:
    manifest = portable_failure()
    comment, summary = markdown.comment_markdown(manifest), markdown.summary_markdown(manifest)

    for text in (comment, summary):
        assert "| factor | result | step | cause | fix or note |" in text
        assert "| hostname (A runner, V elsewhere) | same |  |  |  |" in text
    assert markdown.title(manifest) == "bit-for-bit reproducible here, not portable · threads, path"


def test_a_manifest_without_vary_shows_no_table() -> None:
    manifest = json.loads(MANIFEST_FAIL.read_text(encoding="utf-8"))

    assert vary_text.lines(manifest["comparison"]) == []
    assert vary_text.markdown_table(manifest["comparison"]) == ""
