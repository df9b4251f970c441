"""The Markdown of `repro-gate upgrade`: code spans and running text that keep outside names
inert, the check-run title for each verdict, and the report's folded sections."""

from __future__ import annotations

from typing import Any

from markdown_it import MarkdownIt

from repro_gate.render import markdown_upgrade as mu

SEARCH = {"status": "found", "runs": 3, "max_runs": 32,
          "trials": [{"packages": ["mathlib"], "outcome": "changed", "step": 3}]}


def html(source: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(source)


def document(verdict: str, **fields: Any) -> dict[str, Any]:
    built: dict[str, Any] = {
        "gate": "train", "verdict": verdict, "reasons": [],
        "numerics": {"status": "same", "tolerance": "bitwise", "comparison": {
            "trajectory": {"steps_compared": 8}, "artifacts": [{"path": "model.pt"}]}},
        "changes": [{"name": "mathlib", "old": "1.0", "new": "1.1", "kind": "upgraded",
                     "direct": True, "applies": True}],
        "culprits": [], "culprit_search": SEARCH,
        "reproducibility": {"baseline": None, "candidate": None, "new_nondeterministic_ops": []},
        "candidate": {"lock": "candidate.uv.lock"},
    }
    built.update(fields)
    return built


def test_a_code_span_fence_is_longer_than_any_backticks_inside() -> None:
    assert mu.code("mathlib") == "`mathlib`"
    assert mu.code("a``b") == "```a``b```"
    assert mu.code("`edge`") == "`` `edge` ``"
    rendered = html(mu.code("a``b", in_table=False))
    assert rendered == "<p><code>a``b</code></p>\n"


def test_a_pipe_is_escaped_only_inside_a_table() -> None:
    assert mu.code("a|b") == "`a\\|b`"
    assert mu.code("a|b", in_table=False) == "`a|b`"


def test_running_text_escapes_markdown_html_and_mentions() -> None:
    line = mu.text("see *this* <b>now</b> [x](y) @octocat\nnext")
    assert "\n" not in line
    assert "@octocat" not in line and "@\u200boctocat" in line
    rendered = html(line)
    assert "<em>" not in rendered and "<b>" not in rendered and "<a " not in rendered
    assert "*this*" in rendered and "&lt;b&gt;now&lt;/b&gt;" in rendered


def test_control_characters_are_shown_not_sent() -> None:
    assert mu.code("evil\x1b[31m") == "`evil\\x1b[31m`"
    assert mu.text("bell\x07") == "bell\\\\x07"  # the escape's backslash is itself escaped


def test_titles_of_same_and_of_nothing_compared() -> None:
    assert mu.title(document("same")) == "numerics kept · bit for bit, reproducible"
    nothing = document("same", changes=[],
                       numerics={"status": "not_compared", "tolerance": "bitwise",
                                 "comparison": None})
    assert mu.title(nothing) == "nothing compared · the two locks pin the same versions"


def test_titles_of_changed_not_reproducible_and_error() -> None:
    culprit = {"name": "mathlib", "old": "1.0", "new": "1.1", "kind": "upgraded", "group": 0,
               "first_divergence": None}
    changed = document("changed", culprits=[culprit])
    assert mu.title(changed) == "numerics changed · mathlib 1.0 -> 1.1"
    broken = document("not_reproducible", reasons=[{"code": "x", "message": "fallback"}],
                      reproducibility={"baseline": None, "new_nondeterministic_ops": [],
                                       "candidate": {"verdict": "fail", "reasons": [
                                           {"code": "y", "message": "runs\ndiverge"}]}})
    assert mu.title(broken) == "candidate not reproducible · runs diverge"
    failed = document("error", reasons=[{"code": "lock_unresolvable", "message": "no lock"}])
    assert mu.title(failed) == "could not decide · no lock"


def test_the_report_of_same_folds_its_changes_and_its_trials() -> None:
    report = mu.report(document("same"))
    assert report.startswith("### ✅ train upgrade: numerics kept · bit for bit, reproducible\n")
    assert "<details><summary>Changes (1)</summary>" in report  # closed: nothing to look at
    assert "<details><summary>Culprit search: 1 trial</summary>" in report
    assert "**Why:**" not in report and "**Reasons**" not in report
    assert report.count("<details") == report.count("</details>")


def test_an_error_report_lists_what_was_kept_instead_of_the_cost() -> None:
    failed = document("error", reasons=[{"code": "lock_unresolvable", "message": "no lock"}],
                      reproducibility={"baseline": {"manifest": "out/baseline/manifest.json"},
                                       "candidate": None, "new_nondeterministic_ops": []})
    report = mu.report(failed)
    assert report.startswith("### ⚠️ train upgrade: could not decide · no lock")
    assert "- `lock_unresolvable`: no lock" in report
    assert "- baseline manifest: `out/baseline/manifest.json`" in report
    assert "- candidate lock: `candidate.uv.lock`" in report
    assert "Cost of determinism" not in report
    assert "<details open><summary>Changes (1)</summary>" in report
