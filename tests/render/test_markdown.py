"""The Markdown a person reads: title, check-run summary, job summary, PR comment."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from markdown_it import MarkdownIt

from repro_gate import validation
from repro_gate.publish.github.statuses import clip
from repro_gate.render import markdown


def passing(manifest: dict[str, Any]) -> dict[str, Any]:
    manifest = copy.deepcopy(manifest)
    manifest["verdict"], manifest["reasons"], manifest["nondeterministic_ops"] = "pass", [], []
    manifest["comparison"]["first_divergence"] = None
    for artifact in manifest["comparison"]["artifacts"]:
        artifact["status"] = "equal"
        artifact.pop("tensors", None)
        artifact.pop("keys", None)
    return manifest


def first_text(source: str) -> str:
    """The first text a reader sees once GitHub renders the Markdown (HTML comments hidden)."""
    tokens = MarkdownIt("commonmark").enable("table").parse(source)
    for token in tokens:
        if token.type == "inline" and token.content.strip():
            return "".join(child.content for child in token.children or [])
    raise AssertionError("no visible text")


def rendered(source: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(source)


def test_titles_say_the_verdict_in_one_line(manifest: dict[str, Any]) -> None:
    assert markdown.title(passing(manifest)) == (
        "bit-for-bit reproducible · determinism cost +7.4% (95% interval +5.1% to +9.8%)"
    )
    assert markdown.title(manifest) == (
        "not reproducible · first divergence at step 3 (fc.weight +1 more)"
    )
    tolerant = passing(manifest)
    tolerant["comparison"]["basis"] = "tolerance"
    tolerant["cost"]["pct"], tolerant["cost"]["ci95_pct"] = -1.25, [-3.0, 0.5]
    assert markdown.title(tolerant) == (
        "reproducible within tolerance · determinism cost -1.2% (95% interval -3.0% to +0.5%)"
    )
    no_trajectory = copy.deepcopy(manifest)
    no_trajectory["comparison"]["first_divergence"] = None
    assert markdown.title(no_trajectory) == "not reproducible · 2 of 3 artifacts differ"
    error = copy.deepcopy(manifest)
    error["verdict"] = "error"
    error["reasons"] = [{"code": "run_failed", "message": "det-2 exited with code 1\nTraceback"}]
    assert markdown.title(error) == "gate error · det-2 exited with code 1 Traceback"
    assert "\n" not in markdown.title(error)


@pytest.mark.parametrize("render", [markdown.comment_markdown, markdown.summary_markdown])
def test_a_reader_sees_the_verdict_first(render: Any, manifest: dict[str, Any]) -> None:
    assert first_text(render(manifest)) == (
        "❌ repro-gate: not reproducible · first divergence at step 3 (fc.weight +1 more)"
    )
    assert first_text(render(passing(manifest))).startswith(
        "✅ repro-gate: bit-for-bit reproducible"
    )
    assert rendered(render(manifest)).startswith("<h3>❌ repro-gate: not reproducible")


def test_comment_is_compact_with_details_folded_and_a_hidden_marker(
    manifest: dict[str, Any],
) -> None:
    body = markdown.comment_markdown({**manifest, "reporting": {"run_url": "https://x/runs/1"}})
    html = rendered(body)
    table = html[html.index("<table>") : html.index("</table>")]
    assert "<td>First divergence (runs A and B)</td>\n<td>step 3 (fc.weight, fc.bias)</td>" in table
    assert ("<td>Determinism cost</td>\n<td>+7.4% (95% interval +5.1% to +9.8%, 6 block pairs)"
            "</td>") in table
    assert '<a href="https://x/runs/1">workflow run</a>' in table
    assert html.index("</table>") < html.index("<details><summary>Details</summary>")
    assert body.count("<!-- repro-gate:repro-gate -->") == 1
    assert body.rstrip().endswith("<!-- repro-gate:repro-gate -->")
    assert "repro-gate:repro-gate" not in first_text(body)
    assert markdown.comment_marker("gpu-nightly") == "<!-- repro-gate:gpu-nightly -->"


def test_the_fixture_is_a_valid_manifest(manifest: dict[str, Any]) -> None:
    assert validation.errors("manifest", manifest) == []
    assert validation.errors("manifest", passing(manifest)) == []


def test_summary_carries_divergence_artifacts_ops_fingerprint_checklist_and_diff(
    manifest: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_WORKSPACE", "/github/workspace")
    summary = markdown.summary_markdown(manifest)
    html = rendered(summary)
    assert ("<strong>First divergence of runs A and B:</strong> step 3, parameters fc.weight,"
            " fc.bias") in html
    assert "<td><code>checkpoints/model.safetensors</code></td>" in html
    assert "2 of 3 tensors differ, max abs diff 2.38e-07" in html
    assert "<td><code>model.py:88</code></td>" in html
    site_packages = "/opt/conda/lib/python3.11/site-packages/transformers/modeling_utils.py"
    assert f"<td><code>{site_packages}:1204</code></td>" in html
    assert "| torch | 2.5.1+cu124 |" in summary
    assert "| NVIDIA driver | 550.54.15 |" in summary
    assert "| commit | 2f9c1e0b7a6d |" in summary
    assert "| GPUs | 1 x NVIDIA A10G |" in summary
    assert "- ✅ **cuBLAS workspace config**: CUBLAS_WORKSPACE_CONFIG=:4096:8 is set\n" in summary
    assert "- ❌ **Deterministic algorithms**: index_add_cuda_ at model.py:88" in summary
    assert "Fix: replace index_add_ with a scatter over sorted indices" in summary
    assert "Fix: set torch.backends.cuda.matmul.allow_tf32 = False" in summary
    assert "- env: torch 2.4.1+cu124 -> 2.5.1+cu124" in summary
    assert "read-only" not in summary


def test_names_from_the_training_cannot_add_markdown_of_their_own(
    manifest: dict[str, Any]
) -> None:
    forged = "x\n## PASS reproducible\x1b"
    manifest["comparison"]["first_divergence"].update(cause="unknown",
                                                      parameters=[forged, "fc.bias"])
    manifest["comparison"]["artifacts"][2]["path"] = forged

    for render in (markdown.summary_markdown, markdown.comment_markdown,
                   markdown.details_markdown):
        text = render(manifest)
        assert not any(line.startswith("## PASS") for line in text.splitlines())
        assert "<h2>" not in rendered(text) and "\x1b" not in text
    assert "parameters x\\n## PASS reproducible\\x1b, fc.bias" in markdown.summary_markdown(
        manifest)


def test_ops_outside_actions_are_relative_to_the_current_directory(
    manifest: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    monkeypatch.chdir(tmp_path)
    manifest["nondeterministic_ops"][0]["file"] = str(tmp_path / "src" / "model.py")
    manifest["nondeterministic_ops"][1]["line"] = None
    html = rendered(markdown.summary_markdown(manifest))
    assert "<td><code>src/model.py:88</code></td>" in html
    site_packages = "/opt/conda/lib/python3.11/site-packages/transformers/modeling_utils.py"
    assert f"<td><code>{site_packages}</code></td>" in html


def test_sparse_sections_show_what_is_known(manifest: dict[str, Any]) -> None:
    hardware = manifest["fingerprint"]["hardware"]
    hardware["driver_version"], hardware["cuda_driver_version"], hardware["gpus"] = None, None, []
    manifest["fingerprint"]["code"]["commit"] = None
    manifest["checklist"] = {
        "items": [],
        "counts": {"pass": 0, "warn": 0, "fail": 0, "deferred": 0},
    }
    manifest["environment_diff"].update(equal=True, changes=[])
    manifest["environment_diff"]["counts"]["env"] = 0
    assert validation.errors("manifest", manifest) == []
    summary = markdown.summary_markdown(manifest)
    fingerprint = summary[summary.index("<summary>Fingerprint") : summary.index("</details>")]
    assert "| torch | 2.5.1+cu124 |" in fingerprint
    for absent in ("NVIDIA driver", "GPUs", "commit"):
        assert f"| {absent} |" not in fingerprint
    assert "<summary>Checklist" not in summary
    assert "No difference from the baseline's environment." in summary


def test_long_environment_diffs_are_cut_to_the_table_limit(manifest: dict[str, Any]) -> None:
    change = manifest["environment_diff"]["changes"][0]
    manifest["environment_diff"]["changes"] = [
        {**change, "field": f"env.packages.p{i}", "message": f"p{i} 1.0 -> 1.1"} for i in range(45)
    ]
    manifest["environment_diff"]["counts"]["env"] = 45
    assert validation.errors("manifest", manifest) == []
    summary = markdown.summary_markdown(manifest)
    assert "- env: p29 1.0 -> 1.1" in summary
    assert "p30 1.0" not in summary
    assert "…and 15 more changes." in summary


def test_sections_absent_are_skipped(manifest: dict[str, Any]) -> None:
    for key in ("fingerprint", "checklist", "environment_diff", "cost"):
        manifest.pop(key)
    manifest["cost"] = None
    summary = markdown.summary_markdown(manifest)
    assert "<summary>" not in summary
    assert "determinism cost" not in markdown.title(passing(manifest))


def test_fork_note_when_reporting_was_deferred(manifest: dict[str, Any]) -> None:
    summary = markdown.summary_markdown(
        {**manifest, "reporting": {"active": True, "ok": True, "deferred": True}}
    )
    assert markdown.FORK_NOTE in summary
    assert first_text(summary).startswith("❌ repro-gate")


def test_long_reports_are_cut_under_githubs_limits_with_a_note(manifest: dict[str, Any]) -> None:
    artifact = manifest["comparison"]["artifacts"][0]
    manifest["comparison"]["artifacts"] = [
        {**artifact, "path": f"shard-{i}-{'p' * 300}.safetensors"} for i in range(1000)
    ]
    manifest["reasons"] = [{"code": "artifact_different", "message": "m" * 199}] * 400
    summary = markdown.summary_markdown(manifest)
    comment = markdown.comment_markdown(manifest)
    assert len(summary) <= 65_535 and "cut here" in summary
    assert len(comment) <= 65_536 and "cut here" in comment
    assert comment.rstrip().endswith("<!-- repro-gate:repro-gate -->")
    html = rendered(comment)
    assert html.count("<details>") == html.count("</details>")
    assert first_text(comment).startswith("❌ repro-gate: not reproducible")


def test_status_description_is_clipped_to_140_characters() -> None:
    assert clip("x" * 500) == "x" * 139 + "…"
    assert clip("two\nlines") == "two lines"
