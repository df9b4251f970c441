"""Markdown for GitHub: the check-run title, summary and details, the job summary, the PR comment.

Everything is rendered from the manifest, which is validated against its schema before it is
written. The `fingerprint`, `checklist` and `environment_diff` sections are optional: a section
that is absent is left out of the report.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from repro_gate.fingerprint import diff_lines
from repro_gate.workspace import repository_path, workspace_root

CHECK_TEXT_LIMIT = 65_535  # check-run output.summary and output.text
COMMENT_LIMIT = 65_536  # issue comment body
TABLE_ROWS = 30

VERDICT_ICONS = {"pass": "✅", "fail": "❌", "error": "⚠️"}
STATUS_ICONS = {
    "equal": "✅",
    "within_tolerance": "☑️",
    "different": "❌",
    "missing_in_a": "❓",
    "missing_in_b": "❓",
    "not_compared": "⏭️",
}
FORK_NOTE = (
    "This pull request comes from a fork and its token is read-only: the check run, status and"
    " comment will be posted by the trusted `workflow_run` job (`repro-gate report`)."
)


def comment_marker(gate: str) -> str:
    """The hidden marker that finds this gate's sticky comment again."""
    return f"<!-- repro-gate:{gate} -->"


def title(manifest: Mapping[str, Any]) -> str:
    """One line: the verdict in words and its most useful number."""
    verdict = manifest.get("verdict")
    comparison = _mapping(manifest.get("comparison"))
    if verdict == "pass":
        words = (
            "reproducible within tolerance"
            if comparison.get("basis") == "tolerance"
            else "bit-for-bit reproducible"
        )
        cost = _cost_text(manifest)
        return _one_line(f"{words} · determinism cost {cost}" if cost else words)
    if verdict == "fail":
        divergence = _mapping(comparison.get("first_divergence"))
        if "step" in divergence:
            where = _parameters_text(divergence.get("parameters"), limit=1)
            suffix = f" ({where})" if where else ""
            return _one_line(
                f"not reproducible · first divergence at step {divergence['step']}{suffix}"
            )
        artifacts = _list(comparison.get("artifacts"))
        differing = [a for a in artifacts if _mapping(a).get("status") == "different"]
        if differing:
            total = len(artifacts)
            return _one_line(f"not reproducible · {len(differing)} of {total} artifacts differ")
        return _one_line(f"not reproducible · {_first_reason(manifest) or 'runs differ'}")
    return _one_line(f"gate error · {_first_reason(manifest) or 'the gate could not decide'}")


def summary_markdown(manifest: Mapping[str, Any]) -> str:
    """The check-run summary and the job summary: verdict first, then the evidence."""
    parts = [_heading(manifest), _verdict_line(manifest)]
    if _mapping(manifest.get("reporting")).get("deferred"):
        parts.append(f"> [!NOTE]\n> {FORK_NOTE}")
    parts += _evidence(manifest)
    return truncate("\n\n".join(p for p in parts if p) + "\n", CHECK_TEXT_LIMIT)


def details_markdown(manifest: Mapping[str, Any]) -> str:
    """The check-run `text`: runs, cost figures and tensor-level differences."""
    parts = [_runs_table(manifest), _cost_details(manifest), _tensor_details(manifest)]
    return truncate("\n\n".join(p for p in parts if p) + "\n", CHECK_TEXT_LIMIT)


def comment_markdown(manifest: Mapping[str, Any]) -> str:
    """The sticky PR comment: verdict line, compact table, folded details, hidden marker."""
    gate = str(manifest.get("gate") or "repro-gate")
    rows = [
        ("Verdict", f"**{manifest.get('verdict', 'error')}**"),
        ("Determinism cost", _cost_text(manifest) or "n/a"),
        ("First divergence", _divergence_cell(manifest)),
        ("Artifacts", _artifact_counts(manifest)),
        ("Nondeterministic ops", str(len(_list(manifest.get("nondeterministic_ops"))))),
    ]
    run_url = _mapping(manifest.get("reporting")).get("run_url")
    if isinstance(run_url, str) and run_url:
        rows.append(("Run", f"[workflow run]({run_url})"))
    table = "| | |\n|---|---|\n" + "\n".join(f"| {k} | {_cell(v)} |" for k, v in rows)
    details = "\n\n".join(p for p in _evidence(manifest) if p)
    marker = comment_marker(gate)
    body = (
        f"{_heading(manifest)}\n\n{table}\n\n"
        f"<details><summary>Details</summary>\n\n{details.strip()}\n\n</details>\n"
    )
    return truncate(body, COMMENT_LIMIT - len(marker) - 2) + "\n" + marker + "\n"


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


def _evidence(manifest: Mapping[str, Any]) -> list[str]:
    """The parts after the verdict: reasons, divergence, tables and the optional sections."""
    parts = [
        _reasons(manifest),
        _divergence(manifest),
        _artifacts_table(manifest),
        _ops_table(manifest),
    ]
    if "fingerprint" in manifest:
        parts.append(_folded("Fingerprint", _fingerprint(manifest["fingerprint"])))
    if "checklist" in manifest:
        parts.append(_folded("Checklist", _checklist(manifest["checklist"])))
    if "environment_diff" in manifest:
        parts.append(
            _folded(
                "Environment diff against the baseline",
                _environment_diff(manifest["environment_diff"]),
            )
        )
    return parts


def _heading(manifest: Mapping[str, Any]) -> str:
    icon = VERDICT_ICONS.get(str(manifest.get("verdict")), "⚠️")
    return f"### {icon} {manifest.get('gate') or 'repro-gate'}: {title(manifest)}"


def _verdict_line(manifest: Mapping[str, Any]) -> str:
    line = f"**Verdict:** {manifest.get('verdict', 'error')}"
    cost = _cost_text(manifest)
    if cost:
        basis = _mapping(manifest.get("cost")).get("basis")
        basis_words = {"step_median": "median step time", "wall": "wall time"}.get(str(basis))
        line += f" · **Determinism cost:** {cost}" + (f" ({basis_words})" if basis_words else "")
    runs = _list(manifest.get("runs"))
    if runs:
        line += f" · **Runs:** {len(runs)}"
    return line


def _reasons(manifest: Mapping[str, Any]) -> str:
    reasons = [_mapping(r) for r in _list(manifest.get("reasons"))]
    lines = [f"- `{r.get('code', '?')}`: {_one_line(str(r.get('message', '')))}" for r in reasons]
    return "**Reasons**\n\n" + "\n".join(lines) if lines else ""


def _divergence(manifest: Mapping[str, Any]) -> str:
    divergence = _mapping(_mapping(manifest.get("comparison")).get("first_divergence"))
    if "step" not in divergence:
        return ""
    text = f"**First divergence:** step {divergence['step']}"
    parameters = _parameters_text(divergence.get("parameters"), limit=10)
    if parameters:
        text += f", parameters {parameters}"
    runs = [str(r) for r in _list(divergence.get("runs"))]
    if len(runs) >= 2:
        text += f" (runs `{runs[0]}` and `{runs[1]}`)"
    if divergence.get("loss_differs") is True:
        text += "; the loss differs too"
    return text


def _artifacts_table(manifest: Mapping[str, Any]) -> str:
    artifacts = [_mapping(a) for a in _list(_mapping(manifest.get("comparison")).get("artifacts"))]
    if not artifacts:
        return ""
    rows = [
        f"| `{_cell(a.get('path', '?'))}` | {a.get('kind', '')} | "
        f"{STATUS_ICONS.get(str(a.get('status')), '')} {a.get('status', '')} | "
        f"{_cell(_artifact_detail(a))} |"
        for a in artifacts[:TABLE_ROWS]
    ]
    more = len(artifacts) - TABLE_ROWS
    tail = f"\n\n…and {more} more artifacts." if more > 0 else ""
    return "| Artifact | Kind | Status | Detail |\n|---|---|---|---|\n" + "\n".join(rows) + tail


def _artifact_detail(artifact: Mapping[str, Any]) -> str:
    tensors = [_mapping(t) for t in _list(artifact.get("tensors"))]
    if tensors:
        differing = [t for t in tensors if t.get("status") not in ("equal", "within_tolerance")]
        text = f"{len(differing)} of {len(tensors)} tensors differ"
        worst = [t.get("max_abs_diff") for t in differing if _is_number(t.get("max_abs_diff"))]
        if worst:
            text += f", max abs diff {max(worst):.3g}"
        return text
    keys = [_mapping(k) for k in _list(artifact.get("keys"))]
    if keys:
        differing_keys = [str(k.get("key")) for k in keys if k.get("status") == "different"]
        return f"{len(differing_keys)} of {len(keys)} keys differ" + (
            f": {', '.join(differing_keys[:3])}" if differing_keys else ""
        )
    return str(artifact.get("note", ""))


def _ops_table(manifest: Mapping[str, Any]) -> str:
    ops = manifest["nondeterministic_ops"]
    if not ops:
        return ""
    workspace = workspace_root()
    rows = [
        f"| `{_cell(op['op'])}` | `{_cell(_op_location(op, workspace))}` | {op['count']} |"
        f" {op.get('kind', '')} |"
        for op in ops[:TABLE_ROWS]
    ]
    more = len(ops) - TABLE_ROWS
    tail = f"\n\n…and {more} more ops." if more > 0 else ""
    return (
        "**Nondeterministic ops**\n\n| Op | Where | Count | Kind |\n|---|---|---|---|\n"
        + "\n".join(rows)
        + tail
    )


def _op_location(op: Mapping[str, Any], workspace: Path) -> str:
    """`file:line`, relative to the repository root when the file is inside it."""
    if not op["file"]:
        return "unknown"
    where = repository_path(op["file"], workspace) or op["file"]
    return where if op["line"] is None else f"{where}:{op['line']}"


def _folded(heading: str, body: str) -> str:
    """An optional section, folded under its heading; nothing when it has nothing to show."""
    return f"<details><summary>{heading}</summary>\n\n{body}\n\n</details>" if body else ""


def _fingerprint(fingerprint: Mapping[str, Any]) -> str:
    """The facts that tell two environments apart at a glance."""
    code, env, hardware = fingerprint["code"], fingerprint["env"], fingerprint["hardware"]
    facts = [
        ("commit", code["commit"] and code["commit"][:12]),
        ("dirty tree", code["dirty"]),
        ("image", env["image"]["reference"]),
        ("python", env["python"]),
        ("torch", env["torch"]),
        ("CUDA (build)", env["cuda_build"]),
        ("cuDNN", env["cudnn"]),
        ("NVIDIA driver", hardware["driver_version"]),
        ("seed", fingerprint["random"]["seed"]),
        ("GPUs", _gpu_counts(hardware["gpus"])),
    ]
    rows = [f"| {label} | {_cell(_short(value))} |" for label, value in facts if value is not None]
    return "| Fact | Value |\n|---|---|\n" + "\n".join(rows) if rows else ""


def _gpu_counts(gpus: list[Mapping[str, Any]]) -> str | None:
    """`2 x NVIDIA H100 80GB HBM3, 1 x NVIDIA A10G`; None without GPUs."""
    names = [gpu["name"] or "unnamed GPU" for gpu in gpus]
    counted = {name: names.count(name) for name in names}
    return ", ".join(f"{n} x {name}" for name, n in counted.items()) or None


CHECK_ICONS = {"pass": "✅", "warn": "⚠️", "fail": "❌", "deferred": "⏭️"}


def _checklist(checklist: Mapping[str, Any]) -> str:
    lines = []
    for item in checklist["items"]:
        line = f"- {CHECK_ICONS[item['status']]} **{_one_line(item['title'])}**"
        line += f": {_one_line(item['detail'])}"
        if item["status"] in ("warn", "fail"):
            line += f" Fix: {_one_line(item['fix'])}"
        lines.append(line)
    return "\n".join(lines)


def _environment_diff(environment_diff: dict[str, Any]) -> str:
    if environment_diff["equal"]:
        return "No difference from the baseline's environment."
    lines = [f"- {_one_line(line)}" for line in diff_lines(environment_diff)]
    more = len(lines) - TABLE_ROWS
    tail = f"\n\n…and {more} more changes." if more > 0 else ""
    return "\n".join(lines[:TABLE_ROWS]) + tail


def _runs_table(manifest: Mapping[str, Any]) -> str:
    runs = [_mapping(r) for r in _list(manifest.get("runs"))]
    if not runs:
        return ""
    rows = [
        f"| `{_cell(r.get('name', '?'))}` | {r.get('mode', '')} | {r.get('exit_code')} |"
        f" {r.get('steps', '')} | {_seconds(r.get('wall_seconds'))} |"
        f" {'timed out' if r.get('timed_out') else (r.get('stopped') or '')} |"
        for r in runs
    ]
    return (
        "**Runs**\n\n| Run | Mode | Exit | Steps | Wall | Stopped |\n|---|---|---|---|---|---|\n"
        + "\n".join(rows)
    )


def _cost_details(manifest: Mapping[str, Any]) -> str:
    cost = _mapping(manifest.get("cost"))
    if not cost:
        return ""
    pairs = [
        ("deterministic step", _seconds(cost.get("det_step_seconds"))),
        ("default step", _seconds(cost.get("default_step_seconds"))),
        ("deterministic wall", _seconds(cost.get("det_wall_seconds"))),
        ("default wall", _seconds(cost.get("default_wall_seconds"))),
        ("steps timed", cost.get("steps_timed")),
        ("warm-up steps", cost.get("warmup_steps")),
    ]
    lines = [f"- {k}: {v}" for k, v in pairs if v not in (None, "")]
    if cost.get("note"):
        lines.append(f"- note: {_one_line(str(cost['note']))}")
    return "**Determinism cost**\n\n" + "\n".join(lines) if lines else ""


def _tensor_details(manifest: Mapping[str, Any]) -> str:
    sections = []
    for artifact in _list(_mapping(manifest.get("comparison")).get("artifacts")):
        artifact = _mapping(artifact)
        differing = [
            _mapping(t)
            for t in _list(artifact.get("tensors"))
            if _mapping(t).get("status") not in ("equal", "within_tolerance")
        ]
        if not differing:
            continue
        rows = [
            f"| `{_cell(t.get('name', '?'))}` | {t.get('status', '')} |"
            f" {t.get('differing_elements', '')}/{t.get('total_elements', '')} |"
            f" {_number_text(t.get('max_abs_diff'))} | {_number_text(t.get('max_ulp'))} |"
            for t in differing[:TABLE_ROWS]
        ]
        sections.append(
            f"**`{_cell(artifact.get('path', '?'))}`**\n\n"
            "| Tensor | Status | Differing | Max abs diff | Max ULP |\n|---|---|---|---|---|\n"
            + "\n".join(rows)
        )
    return "\n\n".join(sections)


def _divergence_cell(manifest: Mapping[str, Any]) -> str:
    divergence = _mapping(_mapping(manifest.get("comparison")).get("first_divergence"))
    if "step" not in divergence:
        return "none"
    where = _parameters_text(divergence.get("parameters"), limit=3)
    return f"step {divergence['step']}" + (f" ({where})" if where else "")


def _artifact_counts(manifest: Mapping[str, Any]) -> str:
    artifacts = _list(_mapping(manifest.get("comparison")).get("artifacts"))
    if not artifacts:
        return "none compared"
    counts: dict[str, int] = {}
    for artifact in artifacts:
        status = str(_mapping(artifact).get("status", "unknown"))
        counts[status] = counts.get(status, 0) + 1
    return ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in counts.items())


def _cost_text(manifest: Mapping[str, Any]) -> str:
    pct = _mapping(manifest.get("cost")).get("pct")
    return f"{pct:+.1f}%" if _is_number(pct) else ""


def _parameters_text(parameters: Any, limit: int) -> str:
    names = [str(p) for p in _list(parameters)]
    if not names:
        return ""
    shown = ", ".join(names[:limit])
    return shown + (f" +{len(names) - limit} more" if len(names) > limit else "")


def _first_reason(manifest: Mapping[str, Any]) -> str:
    for reason in _list(manifest.get("reasons")):
        message = _mapping(reason).get("message")
        if isinstance(message, str) and message:
            return message
    return ""


def _short(value: Any, limit: int = 80) -> str:
    text = "n/a" if value is None else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _seconds(value: Any) -> str:
    return f"{value:.4g} s" if _is_number(value) else ""


def _number_text(value: Any) -> str:
    return f"{value:.3g}" if _is_number(value) else ""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _cell(value: Any) -> str:
    """Text safe inside a Markdown table cell."""
    return _one_line(str(value)).replace("|", "\\|")


def _one_line(text: str, limit: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
