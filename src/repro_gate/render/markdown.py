"""Markdown for GitHub: the check-run title, summary and details, the job summary, the PR comment.

Everything is rendered from the manifest, which is validated against its schema before it is
written. The `fingerprint`, `checklist` and `environment_diff` sections are optional: a section
that is absent is left out of the report.

This module holds the entry points and the headline; the sections are in `markdown_evidence`
(summary and comment), `markdown_details` (check-run text) and `markdown_cost` (the cost of
determinism), the text pieces in `markdown_text`, the first divergence's cause in words in
`diagnosis`, the cost's sentences (the same in every report) in `cost_text`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from repro_gate.compare.status import Status
from repro_gate.errors import printable
from repro_gate.render import observed, resume_text, seeding_text, vary_text
from repro_gate.render.cost_text import over_budget_only
from repro_gate.render.diagnosis import explain, headline
from repro_gate.render.golden_chart import golden_chart
from repro_gate.render.golden_line import numerics_changed_only, numerics_markdown
from repro_gate.render.markdown_cost import budget_limit, cost_details, cost_sentence, cost_title
from repro_gate.render.markdown_details import ignored_details, runs_table, tensor_details
from repro_gate.render.markdown_evidence import evidence
from repro_gate.render.markdown_text import (
    as_list,
    as_mapping,
    cell,
    multi_rank,
    one_line,
    parameters_text,
    rank_text,
)

CHECK_TEXT_LIMIT = 65_535  # check-run output.summary and output.text
COMMENT_LIMIT = 65_536  # issue comment body
TITLE_LIMIT = 200  # the longest title: one_line's default

VERDICT_ICONS = {"pass": "✅", "fail": "❌", "error": "⚠️"}
FORK_NOTE = (
    "This pull request comes from a fork and its token is read-only: the check run, status and"
    " comment will be posted by the trusted `workflow_run` job (`repro-gate report`)."
)


def comment_marker(gate: str) -> str:
    """The hidden marker that finds this gate's sticky comment again."""
    return f"<!-- repro-gate:{gate} -->"


def title(manifest: Mapping[str, Any]) -> str:
    """One line: the verdict in words and its most useful number, and what it rests on when
    the runs were not observed step by step."""
    words = observed.of_manifest(manifest)
    if not words:
        return _title(manifest)
    suffix = f" · {words}"  # kept whole: the verdict's words are cut to make room
    return one_line(_title(manifest), TITLE_LIMIT - len(suffix)) + suffix


def _title(manifest: Mapping[str, Any]) -> str:
    verdict = manifest.get("verdict")
    comparison = as_mapping(manifest.get("comparison"))
    cost = cost_title(manifest)
    if verdict == "pass":
        words = _reproducible_words(comparison)
        return one_line(f"{words} · determinism cost {cost}" if cost else words)
    if over_budget_only(manifest):
        words = f"{_reproducible_words(comparison)}, over the {budget_limit(manifest)}cost budget"
        return one_line(f"{words} · determinism cost {cost}")
    if numerics_changed_only(manifest):
        return one_line(f"{_reproducible_words(comparison)}, but the numerics changed")
    if vary_text.not_portable_only(manifest):
        factors = ", ".join(str(e["factor"]) for e in vary_text.changed(comparison))
        return one_line(f"{_reproducible_words(comparison)} here, not portable · {factors}")
    if verdict == "fail":
        divergence = as_mapping(comparison.get("first_divergence"))
        cause = headline(divergence, multi_rank(comparison))
        if cause:
            return one_line(f"not reproducible · {cause}")
        if "step" in divergence:
            where = parameters_text(divergence.get("parameters"), limit=1)
            suffix = f" ({where})" if where else ""
            return one_line(
                f"not reproducible · first divergence at step {divergence['step']}"
                f"{rank_text(comparison)}{suffix}"
            )
        artifacts = as_list(comparison.get("artifacts"))
        differing = [a for a in artifacts if as_mapping(a).get("status") == Status.DIFFERENT]
        if differing:
            total = len(artifacts)
            return one_line(f"not reproducible · {len(differing)} of {total} artifacts differ")
        return one_line(f"not reproducible · {_first_reason(manifest) or 'runs differ'}")
    return one_line(f"gate error · {_first_reason(manifest) or 'the gate could not decide'}")


def _reproducible_words(comparison: Mapping[str, Any]) -> str:
    if comparison.get("basis") == "tolerance":
        return "reproducible within tolerance"
    return "bit-for-bit reproducible"


def summary_markdown(manifest: Mapping[str, Any]) -> str:
    """The check-run summary and the job summary: verdict first, then the evidence."""
    parts = [_heading(manifest), _verdict_line(manifest), numerics_markdown(manifest),
             _gate_seed(manifest), _resume(manifest),
             vary_text.markdown_table(as_mapping(manifest.get("comparison")))]
    if as_mapping(manifest.get("reporting")).get("deferred"):
        parts.append(f"> [!NOTE]\n> {FORK_NOTE}")
    parts += evidence(manifest)
    parts.append(reproduce_markdown(manifest))
    return _ending(truncate("\n\n".join(p for p in parts[:-1] if p) + "\n",
                            CHECK_TEXT_LIMIT - len(parts[-1]) - 2), parts[-1])


def details_markdown(manifest: Mapping[str, Any]) -> str:
    """The check-run `text`: runs, cost figures and tensor-level differences."""
    parts = [
        runs_table(manifest),
        cost_details(manifest),
        tensor_details(manifest),
        ignored_details(manifest),
    ]
    closing = reproduce_markdown(manifest)
    return _ending(truncate("\n\n".join(p for p in parts if p) + "\n",
                            CHECK_TEXT_LIMIT - len(closing) - 2), closing)


def comment_markdown(manifest: Mapping[str, Any]) -> str:
    """The sticky PR comment: verdict line, compact table, folded details, hidden marker."""
    gate = str(manifest.get("gate") or "repro-gate")
    rows = [
        ("Verdict", f"**{manifest.get('verdict', 'error')}**"),
        ("Determinism cost", cost_sentence(manifest) or "not measured"),
        ("First divergence (runs A and B)", _divergence_cell(manifest)),
        ("Artifacts (runs A and B)", _artifact_counts(manifest)),
        ("Nondeterministic ops", str(len(as_list(manifest.get("nondeterministic_ops"))))),
    ]
    seed_note = seeding_text.gate_seed_note(manifest)
    if seed_note:
        rows.append(("Seeding", seed_note))
    run_url = as_mapping(manifest.get("reporting")).get("run_url")
    if isinstance(run_url, str) and run_url:
        rows.append(("Run", f"[workflow run]({run_url})"))
    table = "| | |\n|---|---|\n" + "\n".join(f"| {k} | {cell(v)} |" for k, v in rows)
    details = "\n\n".join(p for p in [*evidence(manifest), reproduce_markdown(manifest)] if p)
    marker = comment_marker(gate)
    folded = f"<details><summary>Details</summary>\n\n{details.strip()}\n\n</details>\n"
    vary = vary_text.markdown_table(as_mapping(manifest.get("comparison")))
    body = "\n\n".join(p for p in (_heading(manifest), _why(manifest), _resume(manifest),
                                     numerics_markdown(manifest), vary, table,
                                     golden_chart(manifest), folded) if p)
    return truncate(body, COMMENT_LIMIT - len(marker) - 2) + "\n" + marker + "\n"


def reproduce_markdown(manifest: Mapping[str, Any]) -> str:
    """The closing section of every report: the lines the training lacks, as a code block."""
    lines = seeding_text.reproduce(manifest)
    if lines is None:
        return ""
    heading = f"**{seeding_text.REPRODUCE_HEADING.capitalize()}:**"
    if not lines:
        return f"{heading} {seeding_text.NOTHING_TO_ADD}."
    return heading + "\n\n```\n" + "\n".join(lines) + "\n```"


def _resume(manifest: Mapping[str, Any]) -> str:
    text = printable(resume_text.paragraph(as_mapping(manifest.get("comparison"))))
    return f"**Resume check:** {text}" if text else ""


def _gate_seed(manifest: Mapping[str, Any]) -> str:
    note = seeding_text.gate_seed_note(manifest)
    return f"**Seeding:** {note}" if note else ""


def _ending(text: str, closing: str) -> str:
    """`text` followed by the closing section (kept whole when the text is cut)."""
    return text + (f"\n{closing}\n" if closing else "")


def truncate(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, with a note saying so."""
    if len(text) <= limit:
        return text
    note = "\n\n*… cut here: the full report is in the manifest (manifest.json).*\n"
    head = text[: limit - len(note)]
    if head.count("<details>") > head.count("</details>"):
        note = note + "\n</details>\n"
        head = text[: limit - len(note)]
    return head + note


def _heading(manifest: Mapping[str, Any]) -> str:
    icon = VERDICT_ICONS.get(str(manifest.get("verdict")), "⚠️")
    return f"### {icon} {manifest.get('gate') or 'repro-gate'}: {title(manifest)}"


def _verdict_line(manifest: Mapping[str, Any]) -> str:
    line = f"**Verdict:** {manifest.get('verdict', 'error')}"
    cost = cost_sentence(manifest)
    if cost:
        line += f" · **Determinism cost:** {cost}"
    runs = as_list(manifest.get("runs"))
    if runs:
        line += f" · **Runs:** {len(runs)}"
    return line


def _divergence_cell(manifest: Mapping[str, Any]) -> str:
    comparison = as_mapping(manifest.get("comparison"))
    divergence = as_mapping(comparison.get("first_divergence"))
    if "step" not in divergence:
        return "none"
    where = parameters_text(divergence.get("parameters"), limit=3)
    step = f"step {divergence['step']}{rank_text(comparison)}"
    return step + (f" ({where})" if where else "")


def _why(manifest: Mapping[str, Any]) -> str:
    """The cause of the first divergence in one sentence, in view above the comment's table."""
    comparison = as_mapping(manifest.get("comparison"))
    divergence = as_mapping(comparison.get("first_divergence"))
    if not headline(divergence, multi_rank(comparison)):
        return ""  # no cause classified (an older manifest): the table says where, as before
    return f"**Why:** {printable(explain(divergence, multi_rank(comparison)))}"


def _artifact_counts(manifest: Mapping[str, Any]) -> str:
    artifacts = as_list(as_mapping(manifest.get("comparison")).get("artifacts"))
    if not artifacts:
        return "none compared"
    counts: dict[str, int] = {}
    for artifact in artifacts:
        status = str(as_mapping(artifact).get("status", "unknown"))
        counts[status] = counts.get(status, 0) + 1
    return ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in counts.items())


def _first_reason(manifest: Mapping[str, Any]) -> str:
    for reason in as_list(manifest.get("reasons")):
        message = as_mapping(reason).get("message")
        if isinstance(message, str) and message:
            return message
    return ""
