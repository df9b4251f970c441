"""`repro-gate attest`: a passing gate's Statement signed as a DSSE envelope, a failed gate's
refused with its own exit code and nothing written, and bad input as one line."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from helpers.attestation_docs import write_gate, write_keys, write_rsa_key

from repro_gate.attestation import statement
from repro_gate.cli.main import main
from repro_gate.errors import EXIT_ERROR, EXIT_NOT_ATTESTABLE, EXIT_PASS


@pytest.fixture(autouse=True)
def no_pushgateway(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("REPRO_GATE_PUSHGATEWAY_URL", "INPUT_PUSHGATEWAY-URL"):
        monkeypatch.delenv(name, raising=False)


def test_the_statement_is_signed_beside_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    gate = write_gate(tmp_path / "repro-gate-out")
    keys = write_keys(tmp_path / "keys")

    assert main(["attest", "--key", str(keys.private)]) == EXIT_PASS

    written = Path("repro-gate-out") / statement.ENVELOPE_NAME
    document = json.loads(written.read_text())
    assert base64.b64decode(document["payload"]) == gate.statement_path.read_bytes()
    assert document["payloadType"] == "application/vnd.in-toto+json"
    out = capsys.readouterr().out
    assert out.startswith(f"repro-gate: signed repro-gate-out/{statement.STATEMENT_NAME}"
                          f" (pass, 2 subjects) as {written} with key ")


def test_a_failed_gate_is_refused_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gate = write_gate(tmp_path / "out", verdict="fail")
    keys = write_keys(tmp_path / "keys")
    output = tmp_path / "signed.json"
    arguments = ["attest", "--key", str(keys.private), "--manifest", str(gate.manifest_path),
                 "--output", str(output)]

    assert main(arguments) == EXIT_NOT_ATTESTABLE
    assert not output.exists()
    assert capsys.readouterr().err == (
        f"repro-gate: error: {gate.statement_path}: the gate's verdict is fail: not signed"
        " (--allow-fail signs it)\n")

    assert main([*arguments, "--allow-fail"]) == EXIT_PASS
    assert output.is_file()


def test_a_statement_edited_after_the_gate_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gate = write_gate(tmp_path / "out")
    keys = write_keys(tmp_path / "keys", "ed25519")
    edited = json.loads(gate.statement_path.read_text())
    edited["predicate"]["compared"]["steps"] = 4000
    gate.statement_path.write_text(json.dumps(edited))

    code = main(["attest", "--key", str(keys.private), "--manifest", str(gate.manifest_path)])

    assert code == EXIT_ERROR
    assert capsys.readouterr().err == (
        f"repro-gate: error: {gate.statement_path}: not the statement of its manifest"
        " (predicate differ); run the gate again\n")
    assert not (gate.output_dir / statement.ENVELOPE_NAME).exists()


def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gate = write_gate(tmp_path / "out")
    rsa = write_rsa_key(tmp_path / "rsa.pem")
    keys = write_keys(tmp_path / "keys")
    cases = [
        (["--key", str(rsa)], f"{rsa}: not an ECDSA P-256 or Ed25519 key"),
        (["--key", str(tmp_path / "none.pem")], f"{tmp_path / 'none.pem'}: private key not found"),
        (["--key", str(keys.private), "--manifest", str(tmp_path / "no.json")],
         f"{tmp_path / 'no.json'}: manifest not found"),
    ]
    for arguments, message in cases:
        full = ["attest", *arguments]
        if "--manifest" not in arguments:
            full += ["--manifest", str(gate.manifest_path)]
        assert main(full) == EXIT_ERROR
        assert capsys.readouterr().err == f"repro-gate: error: {message}\n"

    gate.statement_path.unlink()
    assert main(["attest", "--key", str(keys.private), "--manifest",
                 str(gate.manifest_path)]) == EXIT_ERROR
    assert capsys.readouterr().err == (
        f"repro-gate: error: {gate.statement_path}: statement not found\n")
