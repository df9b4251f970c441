"""Check runs: created in progress, completed with output, annotations sent 50 a request, and
annotations only for ops located inside the repository."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers.fake_github import FakeGitHub
from helpers.github_env import FAST, HEAD_SHA, ops_in_workspace

from repro_gate.publish.github.checks import (
    ANNOTATIONS_PER_REQUEST,
    Annotation,
    annotations_for_ops,
    complete_check_run,
    create_check_run,
)
from repro_gate.publish.github.client import GitHubClient

REPOSITORY = "octo-org/trainer"
OUTPUT = {"title": "not reproducible", "summary": "### ❌ repro-gate"}


def client(github: FakeGitHub) -> GitHubClient:
    return GitHubClient(github.base_url, "ghs_actions", policy=FAST)


def annotations(count: int) -> list[Annotation]:
    return [Annotation(path="src/model.py", start_line=i + 1, end_line=i + 1,
                       annotation_level="warning", title=f"op {i}", message="nondeterministic")
            for i in range(count)]


def test_ops_inside_the_repository_become_annotations(tmp_path: Path) -> None:
    ops: list[dict[str, Any]] = ops_in_workspace(tmp_path, 2)
    ops[1]["kind"] = "strict_error"
    ops.append({"op": "sdpa", "file": "/usr/lib/python3/torch/nn.py", "line": 3, "count": 1})
    ops.append({"op": "cumsum", "file": str(tmp_path / "train.py"), "line": None, "count": 1})
    found, elsewhere = annotations_for_ops(ops, tmp_path)
    assert [(a["path"], a["start_line"], a["annotation_level"]) for a in found] == [
        ("src/model.py", 10, "warning"), ("src/model.py", 11, "failure")]
    assert found[0]["title"] == f"Nondeterministic op: {ops[0]['op']}"
    assert [op["op"] for op in elsewhere] == ["sdpa", "cumsum"]


def test_an_op_without_a_message_gets_one_naming_its_count(tmp_path: Path) -> None:
    op = {"op": "index_add_", "file": str(tmp_path / "m.py"), "line": 7, "count": 12}
    (annotation,), _ = annotations_for_ops([op], tmp_path)
    assert annotation["message"] == (
        "`index_add_` has no deterministic implementation; it ran 12 time(s).")
    assert annotations_for_ops([op], None) == ([], [op])  # no workspace: nothing is inside


def test_a_check_run_is_created_in_progress_and_names_its_app(github: FakeGitHub) -> None:
    run = create_check_run(client(github), REPOSITORY, name="repro-gate", head_sha=HEAD_SHA,
                           details_url="https://github.com/octo-org/trainer/actions/runs/1")
    stored = github.check_runs[run.id]
    assert (stored["status"], stored["head_sha"], stored["name"]) == (
        "in_progress", HEAD_SHA, "repro-gate")
    assert run.app_slug == "github-actions"
    assert run.html_url == f"https://github.com/octo-org/trainer/runs/{run.id}"


def test_completing_sends_every_annotation_in_batches_of_50(github: FakeGitHub) -> None:
    api = client(github)
    run = create_check_run(api, REPOSITORY, name="repro-gate", head_sha=HEAD_SHA,
                           details_url=None)
    complete_check_run(api, REPOSITORY, run.id, conclusion="failure", output=OUTPUT,
                       annotations=annotations(120))
    patches = github.requests_to("PATCH", f"/check-runs/{run.id}$")
    assert [len(p.body["output"]["annotations"]) for p in patches] == [50, 50, 20]
    assert all(p.body["output"]["title"] == OUTPUT["title"] for p in patches)
    assert [a["start_line"] for a in github.annotations[run.id]] == list(range(1, 121))
    stored = github.check_runs[run.id]
    assert (stored["status"], stored["conclusion"]) == ("completed", "failure")


def test_a_run_created_completed_appends_the_annotations_past_50(github: FakeGitHub) -> None:
    count = ANNOTATIONS_PER_REQUEST + 1
    run = create_check_run(client(github), REPOSITORY, name="repro-gate", head_sha=HEAD_SHA,
                           details_url=None, status="completed", conclusion="success",
                           output=OUTPUT, annotations=annotations(count))
    (post,) = github.requests_to("POST", "/check-runs$")
    assert post.body["conclusion"] == "success" and "details_url" not in post.body
    assert len(post.body["output"]["annotations"]) == ANNOTATIONS_PER_REQUEST
    assert len(github.annotations[run.id]) == count
