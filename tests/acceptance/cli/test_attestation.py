"""A real gate's attestation, end to end: the gate writes the in-toto Statement, `repro-gate
attest` signs it, and the envelope checks out with the DSSE protocol and the public key alone;
`repro-gate verify` accepts a bare run's identical checkpoint and refuses a flipped byte,
another key and an edited payload. One tiny gate (the embedded reference, 5 steps) serves all."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from helpers.attestation_docs import KeyPair, sha256, write_keys
from helpers.gate_cli import check

from repro_gate import validation
from repro_gate.attestation.predicate import PREDICATE_TYPE, SCHEMA_NAME
from repro_gate.cli.main import main
from repro_gate.gate.training_run import REFERENCE_DIR, REFERENCE_MODULE

OUTPUT = "repro-gate-out"


def repro_gate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`repro-gate ARGS` in a fresh process, without the CI environment of the machine."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "INPUT_", "REPRO_GATE_"))}
    return subprocess.run([sys.executable, "-m", "repro_gate", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@dataclass(frozen=True)
class Attested:
    workdir: Path
    keys: KeyPair
    envelope: Path

    @property
    def output_dir(self) -> Path:
        return self.workdir / OUTPUT


@pytest.fixture(scope="module")
def attested(tmp_path_factory: pytest.TempPathFactory) -> Attested:
    """A passing gate of the reference training, its Statement signed with a P-256 key."""
    workdir = tmp_path_factory.mktemp("attested")
    gate = check(workdir, "--no-cost", "--steps", "5")
    assert gate.exit_code == 0, gate.stdout + gate.stderr
    keys = write_keys(workdir.parent / f"{workdir.name}-keys", "p256")
    signed = repro_gate(workdir, "attest", "--key", str(keys.private))
    assert signed.returncode == 0, signed.stdout + signed.stderr
    return Attested(workdir, keys, workdir / OUTPUT / "attestation.dsse.json")


def dsse_pae(payload_type: str, body: bytes) -> bytes:
    """The DSSE protocol's PAE, written out here, apart from the code under test."""
    kind = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(body), body)


def test_the_statement_names_run_as_files_and_the_gates_verdict(attested: Attested) -> None:
    statement = json.loads((attested.output_dir / "attestation.intoto.json").read_text())
    predicate = json.loads((attested.output_dir / "predicate.json").read_text())

    assert statement["predicateType"] == PREDICATE_TYPE
    assert statement["predicate"] == predicate
    assert validation.errors(SCHEMA_NAME, predicate) == []
    assert (predicate["verdict"], predicate["launcher"]) == ("pass", "local")
    names = {subject["name"]: subject["digest"]["sha256"] for subject in statement["subject"]}
    assert set(names) == {"model.pt", "metrics.json"}
    run_a = attested.output_dir / "runs" / "A"
    for name, digest in names.items():
        assert sha256((run_a / name).read_bytes()) == digest


def test_the_envelope_checks_out_with_the_dsse_protocol_and_the_public_key(
    attested: Attested
) -> None:
    envelope = json.loads(attested.envelope.read_text())
    payload = base64.b64decode(envelope["payload"])

    assert envelope["payloadType"] == "application/vnd.in-toto+json"
    assert payload == (attested.output_dir / "attestation.intoto.json").read_bytes()
    [signature] = envelope["signatures"]
    public = attested.keys.public_key
    assert isinstance(public, ec.EllipticCurvePublicKey)
    public.verify(base64.b64decode(signature["sig"]),
                  dsse_pae(envelope["payloadType"], payload), ec.ECDSA(hashes.SHA256()))


def verify(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`repro-gate verify ARGS` through the command line's entry point, in this process: the
    checks need no process of their own (the gate and the bare training have theirs)."""
    code = main(["verify", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_verify_accepts_a_bare_runs_identical_checkpoint(
    attested: Attested, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The reference training run by hand, without the gate, saves the checkpoint it attested."""
    reference = json.loads((attested.output_dir / "manifest.json").read_text())["config"]
    steps = reference.get("reference", {}).get("steps", 5)
    bare = subprocess.run(
        [sys.executable, "-m", REFERENCE_MODULE, "--steps", str(steps), "--out", str(tmp_path)],
        env={**os.environ, "PYTHONPATH": str(REFERENCE_DIR)}, capture_output=True, text=True,
        timeout=120, check=False)
    assert bare.returncode == 0, bare.stderr
    model = tmp_path / "model.pt"

    code, out, err = verify(capsys, "--attestation", str(attested.envelope),
                            "--key", str(attested.keys.public), str(model))

    assert code == 0, out + err
    assert out == f"{model}: attested as model.pt (sha256 {sha256(model.read_bytes())})\n"


def test_verify_refuses_a_flipped_byte_another_key_and_an_edited_payload(
    attested: Attested, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    genuine = attested.output_dir / "runs" / "A" / "model.pt"
    model = genuine.read_bytes()
    flipped = tmp_path / "model.pt"
    flipped.write_bytes(model[:-1] + bytes([model[-1] ^ 0x01]))
    other = write_keys(tmp_path / "other", "ed25519")
    document = json.loads(attested.envelope.read_text())
    statement = json.loads(base64.b64decode(document["payload"]))
    statement["subject"][0]["digest"]["sha256"] = sha256(flipped.read_bytes())
    document["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    edited = tmp_path / "edited.dsse.json"
    edited.write_text(json.dumps(document))
    key = str(attested.keys.public)

    byte = verify(capsys, "--attestation", str(attested.envelope), "--key", key, str(flipped))
    other_key = verify(capsys, "--attestation", str(attested.envelope),
                       "--key", str(other.public), str(genuine))
    payload = verify(capsys, "--attestation", str(edited), "--key", key, str(flipped))

    assert (byte[0], other_key[0], payload[0]) == (1, 1, 1)
    assert byte[2] == (f"repro-gate: verify: {flipped}: sha256 {sha256(flipped.read_bytes())}"
                       f" is not attested by {attested.envelope}\n")
    assert "bad signature" in other_key[2] and "bad signature" in payload[2]
    assert byte[1] == other_key[1] == payload[1] == ""
