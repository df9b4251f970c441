"""Check runs: create one `in_progress`, then complete it with output and annotations.

GitHub accepts at most 50 annotations per request; further ones are appended with PATCH.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from repro_gate.publish.github.client import GitHubClient
from repro_gate.workspace import repository_path

ANNOTATIONS_PER_REQUEST = 50


class Annotation(TypedDict):
    """One line annotation, as the check-runs API takes it."""

    path: str
    start_line: int
    end_line: int
    annotation_level: str
    title: str
    message: str


@dataclass(frozen=True)
class CheckRun:
    """A check run GitHub created; `app_slug` names the App the token belongs to."""

    id: int
    html_url: str | None
    app_slug: str | None


def create_check_run(
    client: GitHubClient,
    repository: str,
    *,
    name: str,
    head_sha: str,
    details_url: str | None,
    status: str = "in_progress",
    conclusion: str | None = None,
    output: Mapping[str, str] | None = None,
    annotations: Sequence[Annotation] = (),
) -> CheckRun:
    """POST a check run; with `conclusion` it is created completed."""
    body: dict[str, Any] = {"name": name, "head_sha": head_sha, "status": status}
    if details_url:
        body["details_url"] = details_url
    if conclusion:
        body["conclusion"] = conclusion
    if output is not None:
        body["output"] = {**output, "annotations": list(annotations[:ANNOTATIONS_PER_REQUEST])}
    response = client.request("POST", f"/repos/{repository}/check-runs", json=body)
    created = response.json()
    sent = min(len(annotations), ANNOTATIONS_PER_REQUEST)
    if output is not None and len(annotations) > sent:
        _append_annotations(client, repository, created["id"], output, annotations[sent:])
    return _check_run(created)


def complete_check_run(
    client: GitHubClient,
    repository: str,
    check_run_id: int,
    *,
    conclusion: str,
    output: Mapping[str, str],
    annotations: Sequence[Annotation],
) -> CheckRun:
    """PATCH the check run to `completed` with its output; annotations in batches of 50."""
    body = {
        "status": "completed",
        "conclusion": conclusion,
        "output": {**output, "annotations": list(annotations[:ANNOTATIONS_PER_REQUEST])},
    }
    response = client.request("PATCH", f"/repos/{repository}/check-runs/{check_run_id}", json=body)
    if len(annotations) > ANNOTATIONS_PER_REQUEST:
        _append_annotations(
            client, repository, check_run_id, output, annotations[ANNOTATIONS_PER_REQUEST:]
        )
    return _check_run(response.json())


def annotations_for_ops(
    ops: Sequence[Mapping[str, Any]], workspace: Path | None
) -> tuple[list[Annotation], list[Mapping[str, Any]]]:
    """Annotations for the ops located inside the repository, and the ops that are not."""
    annotations: list[Annotation] = []
    elsewhere: list[Mapping[str, Any]] = []
    for op in ops:
        path = repository_path(op.get("file"), workspace)
        line = op.get("line")
        if path is None or not isinstance(line, int) or line < 1:
            elsewhere.append(op)
            continue
        count = op.get("count", 1)
        strict = op.get("kind") == "strict_error"
        message = op.get("message") or (
            f"`{op.get('op')}` has no deterministic implementation; it ran {count} time(s)."
        )
        annotations.append(
            Annotation(
                path=path,
                start_line=line,
                end_line=line,
                annotation_level="failure" if strict else "warning",
                title=f"Nondeterministic op: {op.get('op')}"[:255],
                message=str(message)[:60_000],
            )
        )
    return annotations, elsewhere


def _append_annotations(
    client: GitHubClient,
    repository: str,
    check_run_id: int,
    output: Mapping[str, str],
    annotations: Sequence[Annotation],
) -> None:
    # Each PATCH must repeat title and summary; its annotations are appended to the earlier ones.
    for start in range(0, len(annotations), ANNOTATIONS_PER_REQUEST):
        batch = list(annotations[start : start + ANNOTATIONS_PER_REQUEST])
        client.request(
            "PATCH",
            f"/repos/{repository}/check-runs/{check_run_id}",
            json={
                "output": {
                    "title": output["title"],
                    "summary": output["summary"],
                    "annotations": batch,
                }
            },
        )


def _check_run(body: Mapping[str, Any]) -> CheckRun:
    app = body.get("app")
    if not isinstance(app, Mapping):
        app = {}
    return CheckRun(id=int(body["id"]), html_url=body.get("html_url"), app_slug=app.get("slug"))
