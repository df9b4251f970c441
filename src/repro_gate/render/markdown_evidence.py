"""The evidence sections of the summary and the PR comment, after the verdict.

Reasons, the first divergence (rank, and the evidence behind its cause), the artifacts table
(with the fields `compare.ignore` left out), the nondeterministic-ops table, where the cost of
determinism comes from (breakdown and op census, when measured), and the optional
`fingerprint`, `checklist` and `environment_diff` sections, each folded under its heading.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from repro_gate.compare.status import UNFAILING, Status
from repro_gate.compare.structured import is_number
from repro_gate.fingerprint import diff_lines
from repro_gate.render.diagnosis import facts
from repro_gate.render.markdown_cost import cost_section
from repro_gate.render.markdown_text import (
    TABLE_ROWS,
    as_list,
    as_mapping,
    cell,
    more_text,
    one_line,
    parameters_text,
    rank_text,
    short,
)
from repro_gate.workspace import repository_path, workspace_root

STATUS_ICONS: dict[str, str] = {
    Status.EQUAL: "✅",
    Status.WITHIN_TOLERANCE: "☑️",
    Status.DIFFERENT: "❌",
    Status.MISSING_IN_A: "❓",
    Status.MISSING_IN_B: "❓",
    Status.NOT_COMPARED: "⏭️",
}
CHECK_ICONS = {"pass": "✅", "warn": "⚠️", "fail": "❌", "risk": "💡", "deferred": "⏭️"}
REASON_CHARACTERS = 400  # a reason's sentence names the cause and its fix: keep it whole
IGNORED_SHOWN = 4  # field names in an artifact's Detail cell


def evidence(manifest: Mapping[str, Any]) -> list[str]:
    """The parts after the verdict: reasons, divergence, tables and the optional sections."""
    parts = [
        _reasons(manifest),
        _divergence(manifest),
        _artifacts_table(manifest),
        _ops_table(manifest),
        cost_section(manifest),
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


def _reasons(manifest: Mapping[str, Any]) -> str:
    reasons = [as_mapping(r) for r in as_list(manifest.get("reasons"))]
    lines = [
        f"- `{r.get('code', '?')}`: {one_line(str(r.get('message', '')), REASON_CHARACTERS)}"
        for r in reasons
    ]
    return "**Reasons**\n\n" + "\n".join(lines) if lines else ""


def _divergence(manifest: Mapping[str, Any]) -> str:
    comparison = as_mapping(manifest.get("comparison"))
    divergence = as_mapping(comparison.get("first_divergence"))
    if "step" not in divergence:
        return ""
    text = (f"**First divergence of runs A and B:** step {divergence['step']}"
            f"{rank_text(comparison)}")
    parameters = parameters_text(divergence.get("parameters"), limit=10)
    if parameters:
        text += f", parameters {parameters}"
    runs = [str(r) for r in as_list(divergence.get("runs"))]
    if len(runs) >= 2:
        text += f" (runs `{runs[0]}` and `{runs[1]}`)"
    if divergence.get("loss_differs") is True:
        text += "; the loss differs too"
    return text + _cause(divergence)


def _cause(divergence: Mapping[str, Any]) -> str:
    """The evidence behind the cause sentence (which is among the reasons), one item a line."""
    lines = [f"- {label}: {_fact(label, text)}" for label, text in facts(divergence)]
    return "\n\n" + "\n".join(lines) if lines else ""


def _fact(label: str, text: str) -> str:
    """Names of code (module, op, cause) as code; sentences and name lists as text."""
    coded = label in ("cause", "module", "nondeterministic op")
    return f"`{one_line(text)}`" if coded else one_line(text)


def _artifacts_table(manifest: Mapping[str, Any]) -> str:
    artifacts = [
        as_mapping(a) for a in as_list(as_mapping(manifest.get("comparison")).get("artifacts"))
    ]
    if not artifacts:
        return ""
    rows = [
        f"| `{cell(a.get('path', '?'))}` | {a.get('kind', '')} | "
        f"{STATUS_ICONS.get(str(a.get('status')), '')} {a.get('status', '')} | "
        f"{cell(_detail_with_ignored(a))} |"
        for a in artifacts[:TABLE_ROWS]
    ]
    tail = more_text(len(artifacts), "artifacts")
    return "| Artifact | Kind | Status | Detail |\n|---|---|---|---|\n" + "\n".join(rows) + tail


def _detail_with_ignored(artifact: Mapping[str, Any]) -> str:
    return "; ".join(p for p in (_artifact_detail(artifact), _ignored_text(artifact)) if p)


def _artifact_detail(artifact: Mapping[str, Any]) -> str:
    tensors = [as_mapping(t) for t in as_list(artifact.get("tensors"))]
    if tensors:
        differing = [t for t in tensors if t.get("status") not in UNFAILING]
        text = f"{len(differing)} of {len(tensors)} tensors differ"
        worst = [diff for t in differing if is_number(diff := t.get("max_abs_diff"))]
        if worst:
            text += f", max abs diff {max(worst):.3g}"
        return text
    keys = [as_mapping(k) for k in as_list(artifact.get("keys"))]
    if keys:
        differing_keys = [str(k.get("key")) for k in keys if k.get("status") == Status.DIFFERENT]
        return f"{len(differing_keys)} of {len(keys)} keys differ" + (
            f": {', '.join(differing_keys[:3])}" if differing_keys else ""
        )
    return str(artifact.get("note", ""))


def _ignored_text(artifact: Mapping[str, Any]) -> str:
    """`; not compared: finished_at (differs), host` for the fields `compare.ignore` left out."""
    fields = [as_mapping(f) for f in as_list(artifact.get("ignored"))]
    if not fields:
        return ""
    names = [f"{f.get('key')} (differs)" if f.get("differs") else str(f.get("key"))
             for f in fields[:IGNORED_SHOWN]]
    more = f" +{len(fields) - IGNORED_SHOWN} more" if len(fields) > IGNORED_SHOWN else ""
    return f"not compared: {', '.join(names)}{more}"


def _ops_table(manifest: Mapping[str, Any]) -> str:
    ops = manifest["nondeterministic_ops"]
    if not ops:
        return ""
    workspace = workspace_root()
    rows = [
        f"| `{cell(op['op'])}` | `{cell(_op_location(op, workspace))}` | {op['count']} |"
        f" {op.get('kind', '')} |"
        for op in ops[:TABLE_ROWS]
    ]
    tail = more_text(len(ops), "ops")
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
        ("seed", _seed_text(fingerprint["random"].get("seed"))),
        ("GPUs", _gpu_counts(hardware["gpus"])),
    ]
    rows = [f"| {label} | {cell(short(value))} |" for label, value in facts if value is not None]
    return "| Fact | Value |\n|---|---|\n" + "\n".join(rows) if rows else ""


def _seed_text(seed: Any) -> str:
    return f"{seed} (seeded by the gate)" if isinstance(seed, int) else "none from the gate"


def _gpu_counts(gpus: list[Mapping[str, Any]]) -> str | None:
    """`2 x NVIDIA H100 80GB HBM3, 1 x NVIDIA A10G`; None without GPUs."""
    names = [gpu["name"] or "unnamed GPU" for gpu in gpus]
    counted = {name: names.count(name) for name in names}
    return ", ".join(f"{n} x {name}" for name, n in counted.items()) or None


def _checklist(checklist: Mapping[str, Any]) -> str:
    lines = []
    for item in checklist["items"]:
        line = f"- {CHECK_ICONS[item['status']]} **{one_line(item['title'])}**"
        line += f": {one_line(item['detail'])}"
        if item["status"] in ("warn", "fail", "risk"):
            line += f" Fix: {one_line(item['fix'])}"
        lines.append(line)
    return "\n".join(lines)


def _environment_diff(environment_diff: dict[str, Any]) -> str:
    if environment_diff["equal"]:
        return "No difference from the baseline's environment."
    lines = [f"- {one_line(line)}" for line in diff_lines(environment_diff)]
    tail = more_text(len(lines), "changes")
    return "\n".join(lines[:TABLE_ROWS]) + tail
