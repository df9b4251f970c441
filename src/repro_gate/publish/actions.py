"""GitHub Actions runtime conventions: step outputs, the job summary, log groups, annotations.

Everything here is a no-op outside Actions (`GITHUB_ACTIONS` is not `true`). Workflow commands
(`::group::`, `::error`, `::add-mask::`) go to stdout; file commands are appended to the files
named by `GITHUB_OUTPUT` and `GITHUB_STEP_SUMMARY`.

The runner reads a command on any line of stdout or stderr that starts with `::` (after
leading spaces) or holds `##[`; a name the training chose may do either. So the action prints
inside `commands_stopped()`, and only `emit` writes the gate's own commands between windows.
"""

from __future__ import annotations

import os
import secrets
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from repro_gate.credentials import credential_values
from repro_gate.errors import printable
from repro_gate.publish import attest_outputs
from repro_gate.render import cost_text
from repro_gate.render.diagnosis import explain, headline
from repro_gate.render.markdown import summary_markdown
from repro_gate.workspace import repository_path, workspace_root

# GitHub refuses a step summary above 1 MiB (and the step keeps its status).
SUMMARY_LIMIT_BYTES = 1024 * 1024
# Actions shows at most 10 error annotations per step; more are dropped silently.
MAX_ERROR_ANNOTATIONS = 10
MANIFEST_FILENAME = "manifest.json"


def in_actions(environ: Mapping[str, str] | None = None) -> bool:
    """True when running as a GitHub Actions step."""
    env = os.environ if environ is None else environ
    return env.get("GITHUB_ACTIONS") == "true"


def escape_data(value: str) -> str:
    """Escape the message part of a workflow command."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """Escape a `key=value` property of a workflow command."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def command(name: str, message: str = "", **properties: object) -> str:
    """One workflow command line, e.g. `::error file=a.py,line=3::message`."""
    props = ",".join(
        f"{key}={escape_property(str(value))}"
        for key, value in properties.items()
        if value is not None
    )
    return f"::{name}{' ' + props if props else ''}::{escape_data(message)}"


def annotation(level: str, message: str, **properties: object) -> str:
    """An annotation (`error`, `warning`, `notice`): its message and properties may hold what
    the training named, so their control characters are shown as escapes."""
    return command(level, printable(message), **{
        key: None if value is None else printable(str(value))
        for key, value in properties.items()})


class _Window:
    """The window of stdout in which workflow commands are off, while one is open."""

    def __init__(self) -> None:
        self.token: str | None = None  # the line `::<token>::` ends the window
        self.stream: TextIO | None = None
        self.lock = threading.Lock()  # a command is written whole, between two windows


_window = _Window()


def _stop_commands(token: str) -> str:
    return f"::stop-commands::{token}"


def _resume_commands(token: str) -> str:
    return f"::{token}::"


@contextmanager
def commands_stopped(stream: TextIO | None = None) -> Iterator[None]:
    """Workflow commands are off on stdout inside the block: whatever is printed there (a run's
    output, a report naming its files) is text to the runner, never a command. The gate's own
    commands still work: `emit` writes them between two windows. Each window's token is random
    and new, so no text printed inside can end it. Already open: nothing more to do."""
    out = stream or sys.stdout
    with _window.lock:
        opened = _window.token is None
        if opened:
            _window.token, _window.stream = secrets.token_hex(16), out
            _write(out, [_stop_commands(_window.token)])
    try:
        yield
    finally:
        if opened:
            with _window.lock:
                if _window.token is not None:
                    _write(out, [_resume_commands(_window.token)])
                _window.token, _window.stream = None, None


def emit(line: str, stream: TextIO | None = None) -> None:
    """Write one workflow command to stdout (where the runner reads them)."""
    emit_all([line], stream)


def emit_all(lines: Iterable[str], stream: TextIO | None = None) -> None:
    """Write each of `lines` as a workflow command; inside `commands_stopped`, the window is
    closed before them and a new one (a new token) opened after."""
    commands = list(lines)
    if not commands:
        return
    out = stream or sys.stdout
    with _window.lock:
        ended = _window.token if _window.stream is out else None
        if ended is not None:
            _window.token = secrets.token_hex(16)
            commands = [_resume_commands(ended), *commands, _stop_commands(_window.token)]
        _write(out, commands)


def _write(out: TextIO, lines: list[str]) -> None:
    out.write("".join(line + "\n" for line in lines))
    out.flush()


def add_mask(value: str, stream: TextIO | None = None) -> None:
    """Ask the runner to mask `value` in every later log line."""
    for line in value.splitlines():
        if line.strip():
            emit(command("add-mask", line), stream)


def mask_credentials(
    environ: Mapping[str, str] | None = None, stream: TextIO | None = None
) -> None:
    """Register every credential value the gate holds with `::add-mask::`, once, at start.

    Only in Actions: anywhere else the command would print the secret it means to hide.
    """
    env = os.environ if environ is None else environ
    if not in_actions(env):
        return
    for value in credential_values(env):
        add_mask(value, stream)


@contextmanager
def group(title: str, enabled: bool = True, stream: TextIO | None = None) -> Iterator[None]:
    """Fold the log lines printed inside the block under `title`."""
    if enabled:
        emit(command("group", title), stream)
    try:
        yield
    finally:
        if enabled:
            emit("::endgroup::", stream)


def output_block(name: str, value: str) -> str:
    """A `GITHUB_OUTPUT` entry; the heredoc form with a random delimiter is safe for any value."""
    delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
    while delimiter in value:
        delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
    return f"{name}<<{delimiter}\n{value}\n{delimiter}\n"


def set_outputs(outputs: Mapping[str, str], environ: Mapping[str, str] | None = None) -> None:
    """Append step outputs to the `GITHUB_OUTPUT` file."""
    env = os.environ if environ is None else environ
    path = env.get("GITHUB_OUTPUT")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as handle:
        for name, value in outputs.items():
            handle.write(output_block(name, value))


def fit_summary(markdown: str, limit: int = SUMMARY_LIMIT_BYTES) -> str:
    """`markdown` cut at a line boundary so that it stays under `limit` bytes in UTF-8."""
    encoded = markdown.encode("utf-8")
    if len(encoded) <= limit:
        return markdown
    note = "\n\n_Summary truncated: see the manifest artifact for the full report._\n"
    budget = limit - len(note.encode("utf-8"))
    head = encoded[:budget].decode("utf-8", errors="ignore")
    cut = head.rfind("\n")
    return (head[:cut] if cut > 0 else head) + note


def write_summary(markdown: str, environ: Mapping[str, str] | None = None) -> None:
    """Append `markdown` to the step summary, within GitHub's size limit."""
    env = os.environ if environ is None else environ
    path = env.get("GITHUB_STEP_SUMMARY")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(fit_summary(markdown))


def outputs_for(manifest: Mapping[str, Any], manifest_path: Path | None) -> dict[str, str]:
    """The action's outputs: verdict, cost-pct, cost-status, config-hash, manifest-path,
    first-divergent-step.

    `cost-pct` is empty unless the cost was measured: an inconclusive figure is not a number a
    workflow should act on. `cost-status` says which (`measured`, `inconclusive`, empty when the
    cost was not measured at all).
    """
    cost = cost_text.read(manifest.get("cost"))
    divergence = (manifest.get("comparison") or {}).get("first_divergence") or {}
    step = divergence.get("step")
    return {
        "verdict": str(manifest.get("verdict", "error")),
        "cost-pct": cost_text.output_pct(cost),
        "cost-status": cost_text.output_status(cost),
        "config-hash": str(manifest.get("config_hash", "")),
        "manifest-path": "" if manifest_path is None else str(manifest_path),
        "first-divergent-step": "" if step is None else str(step),
    }


def op_annotations(manifest: Mapping[str, Any], workspace: Path | str) -> list[str]:
    """`::error` commands for nondeterministic ops attributed to lines of the repository."""
    lines = []
    for op in manifest.get("nondeterministic_ops", []):
        if not op.get("file") or not op.get("line"):
            continue
        relative = repository_path(op["file"], workspace)
        if relative is None:
            continue
        message = op.get("message") or f"{op['op']} has no deterministic implementation"
        lines.append(
            annotation(
                "error",
                f"{message} ({op.get('count', 1)}x)",
                file=relative,
                line=op["line"],
                title=f"nondeterministic op: {op['op']}",
            )
        )
        if len(lines) == MAX_ERROR_ANNOTATIONS:
            break
    return lines


def divergence_annotations(manifest: Mapping[str, Any], workspace: Path | str) -> list[str]:
    """An `::error` stating the first divergence's cause and fix, when the gate failed on it.

    At the line of the nondeterministic op seen in that step when it is in the repository.
    Older manifests (no `cause`) get none: their reason says only where, not why.
    """
    comparison = manifest.get("comparison") or {}
    divergence = comparison.get("first_divergence") or {}
    codes = {reason.get("code") for reason in manifest.get("reasons", [])}
    if not divergence.get("cause") or "trajectory_diverged" not in codes:
        return []
    multi_rank = (comparison.get("trajectory") or {}).get("ranks", 1) > 1
    op = divergence.get("op") or {}
    relative = repository_path(op.get("file"), workspace)
    return [
        annotation(
            "error",
            explain(divergence, multi_rank),
            file=relative,
            line=op.get("line") if relative else None,
            title=f"repro-gate: {headline(divergence, multi_rank)}",
        )
    ]


def default_manifest_path(manifest: Mapping[str, Any]) -> Path | None:
    """Where the gate writes the manifest: `<output_dir>/manifest.json`."""
    output_dir = manifest.get("output_dir")
    return Path(output_dir) / MANIFEST_FILENAME if output_dir else None


def publish(
    manifest: dict[str, Any],
    environ: Mapping[str, str] | None = None,
    *,
    manifest_path: Path | None = None,
    stream: TextIO | None = None,
) -> None:
    """Write outputs, the job summary and op annotations for `manifest`; never raises."""
    env = os.environ if environ is None else environ
    if not in_actions(env):
        return
    path = manifest_path if manifest_path is not None else default_manifest_path(manifest)
    steps: tuple[Callable[[], object], ...] = (
        lambda: set_outputs(outputs_for(manifest, path), env),
        lambda: set_outputs(attest_outputs.outputs_for(manifest, env), env),
        lambda: write_summary(summary_markdown(manifest), env),
        lambda: emit_all(_annotations(manifest, workspace_root(env)), stream),
    )
    for step in steps:
        try:
            step()
        except Exception as error:  # reporting must never change the verdict
            emit(annotation("warning", f"repro-gate: could not publish to Actions: {error}"),
                 stream)


def budget_annotations(manifest: Mapping[str, Any]) -> list[str]:
    """An `::error` stating the cost over its budget, when that failed the gate (no line of the
    repository is to blame: it stands on the step)."""
    return [
        annotation("error", str(reason.get("message", "")),
                   title="repro-gate: cost of determinism over budget")
        for reason in manifest.get("reasons", [])
        if reason.get("code") == cost_text.OVER_BUDGET_CODE
    ][:1]


def _annotations(manifest: Mapping[str, Any], workspace: Path) -> list[str]:
    """The budget and the divergence's cause first, then the ops, within the per-step limit."""
    found = budget_annotations(manifest) + divergence_annotations(manifest, workspace)
    found += op_annotations(manifest, workspace)
    return found[:MAX_ERROR_ANNOTATIONS]
