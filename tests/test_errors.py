"""The error tree, the one-line form of an error, and the closed set of reason codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro_gate import validation
from repro_gate.cli.main import main
from repro_gate.errors import (
    EXIT_ERROR,
    EXIT_FAIL,
    EXIT_NOT_ATTESTABLE,
    EXIT_NOT_BLESSABLE,
    EXIT_PASS,
    EXIT_REFUSED,
    EXIT_TAMPERED,
    AttestationError,
    ConfigError,
    ErrorKind,
    GateError,
    GitHubError,
    MissingDependencyError,
    NotAttestableError,
    PublishError,
    PushError,
    ReportInputError,
    ReproGateError,
    RunTamperedError,
    one_line,
    printable,
)
from repro_gate.gate import verdict


def test_one_line_is_the_first_non_blank_line() -> None:
    assert one_line(ValueError("\n  bad value  \n  in line 3\n")) == "bad value"
    assert one_line("first\nsecond") == "first"


def test_one_line_of_an_error_without_text_is_its_type() -> None:
    assert one_line(TimeoutError()) == "TimeoutError"
    assert one_line(ValueError("  \n ")) == "ValueError"
    assert one_line("") == ""


def test_one_line_is_cut_to_the_limit_and_says_so() -> None:
    assert one_line("x" * 300) == "x" * 300
    cut = one_line("x" * 301)
    assert len(cut) == 300 and cut.endswith("…")
    assert one_line(RuntimeError("abcdef"), limit=4) == "abc…"


def test_printable_shows_control_characters_as_python_writes_them() -> None:
    name = "x\n::notice title=repro-gate::PASS reproducible\r\n\t\x1b[31m\x00\x7f\x85\u2028"

    shown = printable(name)

    assert shown == ("x\\n::notice title=repro-gate::PASS reproducible\\r\\n\\t\\x1b[31m"
                     "\\x00\\x7f\\x85\\u2028")
    assert shown.isprintable() and len(shown.splitlines()) == 1


def test_printable_keeps_printable_text_as_it_is() -> None:
    for text in ("checkpoints/model.pt", "encoder.weight", "données/Ω.pt", "a\\nb", "  "):
        assert printable(text) == text
    assert printable(printable("a\nb")) == "a\\nb"  # escaping twice changes nothing more


def test_a_kind_is_an_error_kind_and_its_plain_value() -> None:
    error = GateError("no runs", kind=ErrorKind.RUN_FAILED)
    assert error.kind is ErrorKind.RUN_FAILED
    assert error.kind == "run_failed" and str(error.kind) == "run_failed"
    assert json.dumps({"code": error.kind}) == '{"code": "run_failed"}'
    # A plain value still works while callers move over to ErrorKind.
    assert GateError("no runs", kind="run_failed").kind is ErrorKind.RUN_FAILED  # type: ignore[arg-type]


def test_an_unknown_kind_is_refused_when_raised() -> None:
    with pytest.raises(ValueError, match="not_a_kind"):
        GateError("oops", kind="not_a_kind")  # type: ignore[arg-type]


def test_the_fixed_kinds_of_the_subclasses() -> None:
    assert ConfigError("bad").kind is ErrorKind.CONFIG
    assert MissingDependencyError("x", "pip install y").kind is ErrorKind.MISSING_DEPENDENCY
    assert ReportInputError("no token").kind is ErrorKind.REPORT_INPUT
    assert AttestationError("bad key").kind is ErrorKind.ATTESTATION
    assert AttestationError("bad key").exit_code == EXIT_ERROR
    # A failed gate's statement is refused with an exit code of its own, not as bad input.
    assert NotAttestableError("failed gate").kind is ErrorKind.ATTESTATION
    assert NotAttestableError("failed gate").exit_code == EXIT_NOT_ATTESTABLE == 6
    assert RunTamperedError("a link").kind is ErrorKind.RUN_TAMPERED


def test_each_exit_code_of_an_error_is_its_own() -> None:
    codes = [EXIT_PASS, EXIT_FAIL, EXIT_ERROR, EXIT_REFUSED, EXIT_NOT_BLESSABLE, EXIT_TAMPERED,
             EXIT_NOT_ATTESTABLE]
    assert len(set(codes)) == len(codes)
    assert RunTamperedError("a link").exit_code == EXIT_TAMPERED


def test_every_error_of_the_product_is_a_repro_gate_error() -> None:
    for error_class in (GateError, ConfigError, ReportInputError, PushError, GitHubError):
        assert issubclass(error_class, ReproGateError)
    assert issubclass(PushError, PublishError) and issubclass(GitHubError, PublishError)
    # Publishing never decides the verdict, so its errors are no GateError (no kind, no exit).
    assert not issubclass(PublishError, GateError)
    assert GateError("x", kind=ErrorKind.INTERNAL).exit_code == EXIT_ERROR


def test_the_publishing_errors_keep_their_old_homes() -> None:
    from repro_gate.publish.github import client
    from repro_gate.publish.metrics import pushgateway

    assert client.GitHubError is GitHubError
    assert pushgateway.PushError is PushError


def test_publishing_errors_keep_their_behaviour() -> None:
    assert PushError("rejected", retry=False).retry is False
    error = GitHubError("POST", "/repos/o/r/issues/1/comments", 403,
                        "Resource not accessible by integration")
    assert str(error) == (
        "POST /repos/o/r/issues/1/comments: HTTP 403: Resource not accessible by integration"
    )
    assert error.read_only and error.unavailable
    assert str(GitHubError("GET", "/x", None, "timed out")) == "GET /x: no answer: timed out"


def test_schema_reason_codes_are_the_error_kinds_and_the_verdict_codes() -> None:
    schema = validation.load("manifest")
    code = schema["properties"]["reasons"]["items"]["properties"]["code"]
    assert len(code["enum"]) == len(set(code["enum"]))
    assert set(code["enum"]) == {kind.value for kind in ErrorKind} | verdict.REASON_CODES


def test_verdict_codes_and_error_kinds_do_not_overlap() -> None:
    # One code, one meaning: a fail reason must never read like an error.
    assert not {kind.value for kind in ErrorKind} & verdict.REASON_CODES


def test_the_upcoming_kinds_exist() -> None:
    assert ErrorKind("cancelled") is ErrorKind.CANCELLED
    assert ErrorKind("internal") is ErrorKind.INTERNAL


def test_main_prints_a_gate_error_once_as_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = str(tmp_path / "nope.json")
    assert main(["diff", missing, missing]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.count("repro-gate: error: ") == 1
    assert err.startswith("repro-gate: error: ") and err.count("\n") == 1
