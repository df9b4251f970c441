"""`repro-gate report`: the local preview of what would be posted, and every input refused
before a request is made."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.manifest_docs import load_current

from repro_gate.cli.commands.report import preview, report
from repro_gate.cli.main import main
from repro_gate.errors import EXIT_ERROR, ErrorKind, GateError, ReportInputError
from repro_gate.publish.github.reporter import TOKEN_VARIABLES

HEADINGS = ["## Pull request comment", "## Check run title", "## Check run summary",
            "## Job summary"]


@pytest.fixture
def manifest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A failing gate's manifest, with no GitHub token in the environment."""
    for name in TOKEN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(load_current()))
    return path


def test_markdown_prints_every_text_under_its_heading_without_a_token(
    manifest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = manifest.read_text()

    assert report(manifest, markdown=True) == 0

    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if line.startswith("## ")] == HEADINGS
    assert manifest.read_text() == before  # a preview records nothing


def test_the_preview_is_the_same_text_the_command_prints(
    manifest: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = load_current()
    text = preview(document)

    main(["report", "--manifest", str(manifest), "--markdown"])

    assert capsys.readouterr().out == text
    comment = text.split("## Check run title", 1)[0]
    assert "diverge at step 3" in comment  # the manifest's first reason


def test_without_a_token_nothing_is_posted(manifest: Path) -> None:
    with pytest.raises(ReportInputError) as raised:
        report(manifest)

    assert raised.value.kind is ErrorKind.REPORT_INPUT
    assert raised.value.message == "no GitHub token: set the github-token input or GITHUB_TOKEN"


@pytest.mark.parametrize(("options", "message"), [
    ({"repo": "not a repo"}, "--repo must be OWNER/NAME, got 'not a repo'"),
    ({"sha": "abc123"}, "--sha must be a full commit SHA, got 'abc123'"),
    ({"pr": 0}, "--pr must be a pull request number, got 0"),
    ({"timeout": float("nan")}, "--timeout must be a positive number of seconds"),
    ({"timeout": 0.0}, "--timeout must be a positive number of seconds"),
])
def test_bad_targets_are_refused_before_any_request(
    manifest: Path, monkeypatch: pytest.MonkeyPatch, options: dict[str, object], message: str
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_test")

    with pytest.raises(GateError) as raised:
        report(manifest, **options)

    assert raised.value.message == message


def test_a_bad_sha_from_the_command_line_is_one_line(
    manifest: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_test")

    assert main(["report", "--manifest", str(manifest), "--sha", "HEAD"]) == EXIT_ERROR
    assert capsys.readouterr().err == (
        "repro-gate: error: --sha must be a full commit SHA, got 'HEAD'\n")
