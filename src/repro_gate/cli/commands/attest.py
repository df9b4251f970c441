"""`repro-gate attest`: sign the in-toto Statement a gate wrote as a DSSE envelope, with a key
(docs/attestation.md). Keyless signing belongs to the workflow (`actions/attest`)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from repro_gate import manifest
from repro_gate.attestation import extra
from repro_gate.attestation import statement as statements
from repro_gate.config import DEFAULT_OUTPUT_DIR, MetricsConfig, recorded_section
from repro_gate.errors import EXIT_PASS, NotAttestableError


def add_parser(subparsers: Any, name: str) -> None:
    """Register `attest`."""
    parser = subparsers.add_parser(
        name,
        help="sign the gate's in-toto attestation statement with a key (DSSE envelope)",
        description="Sign the in-toto Statement the gate wrote beside its manifest"
        f" ({statements.STATEMENT_NAME}), checked against that manifest, as a DSSE envelope,"
        " with an ECDSA P-256 or Ed25519 private key (unencrypted PEM). Needs"
        f" `{extra.INSTALL}`. With a Pushgateway URL (--pushgateway-url, the environment or"
        " the manifest's metrics.pushgateway_url) the signing is counted"
        " (repro_gate_attestations_total). Exit 0 when signed, 5 when the gate failed"
        " (nothing written; --allow-fail signs it), 2 on bad input.",
    )
    parser.add_argument("--key", required=True, type=Path, metavar="PRIV.pem",
                        help="the private key: ECDSA P-256 or Ed25519, PEM")
    parser.add_argument("--manifest", type=Path, metavar="PATH",
                        help=f"the gate's manifest (default {DEFAULT_OUTPUT_DIR}/"
                             f"{manifest.MANIFEST_NAME}); the statement lies beside it")
    parser.add_argument("--output", type=Path, metavar="PATH",
                        help=f"the envelope (default {statements.ENVELOPE_NAME} beside the"
                             " manifest)")
    parser.add_argument("--allow-fail", action="store_true",
                        help="sign the statement of a gate whose verdict is fail")
    parser.add_argument("--pushgateway-url", metavar="URL",
                        help="count the signing on this Pushgateway")


def run(args: argparse.Namespace) -> int:
    """`repro-gate attest`: its flags as `attest`'s parameters."""
    return attest(args.key, args.manifest, args.output, allow_fail=args.allow_fail,
                  pushgateway_url=args.pushgateway_url)


def attest(key_path: Path, manifest_path: Path | None, output: Path | None, *,
           allow_fail: bool = False, pushgateway_url: str | None = None) -> int:
    """Check the statement against its manifest, refuse a failed gate's, sign, write."""
    extra.require("repro-gate attest")
    from repro_gate.attestation import envelope, signing

    manifest_path = manifest_path or Path(DEFAULT_OUTPUT_DIR) / manifest.MANIFEST_NAME
    document = manifest.read(manifest_path)
    statement_path = manifest_path.parent / statements.STATEMENT_NAME
    checked = statements.check_against(statements.read(statement_path), document,
                                       str(statement_path))
    verdict = checked["predicate"]["verdict"]
    if verdict != "pass" and not allow_fail:
        raise NotAttestableError(f"{statement_path}: the gate's verdict is {verdict}: not"
                                 " signed (--allow-fail signs it)")
    key = signing.load_private(key_path)
    signed = envelope.sign(statements.payload(checked), key)
    target = output or manifest_path.parent / statements.ENVELOPE_NAME
    manifest.write_json_atomic(target, signed.document())
    print(f"repro-gate: signed {statement_path} ({verdict}, {len(checked['subject'])}"
          f" subjects) as {target} with key {signed.signatures[0].keyid[:16]}")
    _count(document, manifest_path, pushgateway_url)
    return EXIT_PASS


def _count(document: dict[str, Any], manifest_path: Path, url: str | None) -> None:
    """Count the signing on the Pushgateway when one is configured; a failure is a warning."""
    from repro_gate.publish.metrics.attested import push_attested
    from repro_gate.publish.metrics.pushgateway import ENV_INPUT_URL, ENV_URL

    settings = MetricsConfig(**recorded_section(document.get("config"), "metrics",
                                                str(manifest_path)))
    environ = dict(os.environ)
    if url:
        environ.pop(ENV_INPUT_URL, None)
        environ[ENV_URL] = url
    pushed = push_attested(document, settings, environ)
    if pushed is None:
        return
    if pushed.counted:
        print(f"repro-gate: {pushed.line}")
    else:
        print(f"repro-gate: warning: {pushed.line}", file=sys.stderr)
