"""`repro-gate verify`: one line per attested file and exit 0; each failed check named and
exit 1; unreadable input one line and exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.attestation_docs import MODEL, Gate, KeyPair, sha256, write_gate, write_keys

from repro_gate.attestation import statement
from repro_gate.cli.main import main
from repro_gate.errors import EXIT_ERROR, EXIT_FAIL, EXIT_PASS


@pytest.fixture(autouse=True)
def no_pushgateway(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("REPRO_GATE_PUSHGATEWAY_URL", "INPUT_PUSHGATEWAY-URL"):
        monkeypatch.delenv(name, raising=False)


def signed(tmp_path: Path, verdict: str = "pass") -> tuple[Gate, KeyPair, Path]:
    gate = write_gate(tmp_path / "out", verdict)
    keys = write_keys(tmp_path / "keys")
    assert main(["attest", "--key", str(keys.private), "--manifest", str(gate.manifest_path),
                 "--allow-fail"]) == EXIT_PASS
    return gate, keys, gate.output_dir / statement.ENVELOPE_NAME


def test_attested_files_pass_one_line_each(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gate, keys, envelope = signed(tmp_path)
    copy = tmp_path / "downloaded.bin"
    copy.write_bytes(MODEL)
    capsys.readouterr()

    code = main(["verify", "--attestation", str(envelope), "--key", str(keys.public),
                 str(copy), str(gate.metrics)])

    assert code == EXIT_PASS
    assert capsys.readouterr().out.splitlines() == [
        f"{copy}: attested as model.bin (sha256 {sha256(MODEL)})",
        f"{gate.metrics}: attested as metrics.json (sha256 {sha256(gate.metrics.read_bytes())})",
    ]


def test_each_failed_check_is_named_with_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gate, keys, envelope = signed(tmp_path)
    flipped = tmp_path / "flipped.bin"
    flipped.write_bytes(bytes([MODEL[0] ^ 1]) + MODEL[1:])
    capsys.readouterr()

    code = main(["verify", "--attestation", str(envelope), "--key", str(keys.public),
                 str(gate.model), str(flipped)])

    captured = capsys.readouterr()
    assert code == EXIT_FAIL
    assert captured.out == f"{gate.model}: attested as model.bin (sha256 {sha256(MODEL)})\n"
    assert captured.err == (f"repro-gate: verify: {flipped}: sha256"
                            f" {sha256(flipped.read_bytes())} is not attested by {envelope}\n")


def test_a_failed_gates_statement_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gate, keys, envelope = signed(tmp_path, verdict="fail")
    capsys.readouterr()

    code = main(["verify", "--attestation", str(envelope), "--key", str(keys.public),
                 str(gate.metrics)])

    assert code == EXIT_FAIL
    assert capsys.readouterr().err == (
        f"repro-gate: verify: {envelope}: the statement of a gate whose verdict is fail,"
        " not pass\n")


def test_unreadable_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gate, keys, envelope = signed(tmp_path)
    not_json = tmp_path / "not.json"
    not_json.write_text("{")
    capsys.readouterr()
    cases = [
        ([str(not_json), str(keys.public), str(gate.model)],
         f"{not_json}: not valid JSON (line 1): Expecting property name enclosed in double"
         " quotes"),
        ([str(envelope), str(keys.private), str(gate.model)],
         f"{keys.private}: not a PEM public key"),
        ([str(envelope), str(keys.public), str(tmp_path / "gone.bin")],
         f"{tmp_path / 'gone.bin'}: file not found"),
    ]
    for (attestation, key, file), message in cases:
        code = main(["verify", "--attestation", attestation, "--key", key, file])
        err = capsys.readouterr().err
        assert code == EXIT_ERROR
        assert err.startswith(f"repro-gate: error: {message}") and err.count("\n") == 1


def test_another_envelope_shape_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gate, keys, envelope = signed(tmp_path)
    envelope.write_text(json.dumps({"payload": "e30="}))
    capsys.readouterr()

    assert main(["verify", "--attestation", str(envelope), "--key", str(keys.public),
                 str(gate.model)]) == EXIT_ERROR
    assert "not a DSSE envelope" in capsys.readouterr().err
