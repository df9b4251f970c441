"""The predicate from a manifest: the tolerance only when the basis is one, run A's launcher,
the golden and resume results in short, vary's entries, and a manifest's facts kept as text."""

from __future__ import annotations

import re
from pathlib import Path

from helpers.attestation_docs import gate_document
from helpers.paths import ROOT

from repro_gate import validation
from repro_gate.attestation import predicate


def test_a_tolerance_gate_in_docker_with_a_golden_file(tmp_path: Path) -> None:
    document = gate_document(tmp_path)
    document["comparison"]["basis"] = "tolerance"
    document["config"]["tolerance"] = {"atol": 1e-6, "rtol": 1e-5}
    for run in document["runs"]:
        run["launcher"] = "docker"
    document["comparison"]["golden"] = {"status": "same", "machine_class": "a10g-cu124",
                                        "path": ".repro-gate/golden/a10g-cu124.json"}
    document["comparison"]["resume"] = {"status": "same", "resume_step": 20}
    vary = [{"factor": "threads", "status": "same", "values": {"A": 2, "V": 1},
             "first_divergence": None, "artifacts": [], "note": ""}]
    document["comparison"]["vary"] = vary
    document["fingerprint"]["env"]["cudnn"] = 90100

    made = predicate.build(document)

    assert made["compared"]["tolerance"] == {"atol": 1e-6, "rtol": 1e-5}
    assert made["launcher"] == "docker"
    assert made["golden"] == {"status": "same", "machine_class": "a10g-cu124",
                              "path": ".repro-gate/golden/a10g-cu124.json"}
    assert made["resume"] == {"status": "same", "resume_step": 20}
    assert made["vary"] == vary
    assert made["environment"]["cudnn"] == "90100"
    assert validation.errors(predicate.SCHEMA_NAME, made) == []


def test_run_a_is_the_first_deterministic_run_of_no_other_purpose(tmp_path: Path) -> None:
    document = gate_document(tmp_path)
    localisation = {**document["runs"][0], "name": "L", "purpose": "localisation",
                    "launcher": "docker"}
    document["runs"].insert(0, localisation)

    assert (predicate.first_run(document) or {})["name"] == "det-1"
    assert predicate.launcher(document) == "local"


def test_an_image_known_by_its_id_alone_gives_that_digest() -> None:
    image = {"reference": "train:dev", "id": "sha256:" + "cd" * 32, "repo_digests": []}

    assert predicate.image_digest(image) == "sha256:" + "cd" * 32
    assert predicate.image_digest({"reference": None, "id": None, "repo_digests": []}) is None


def test_the_type_uri_in_the_docs_and_the_schema_is_the_codes() -> None:
    """The URI is defined once in code; the docs and the schema that name it must agree."""
    named_in = [ROOT / "docs/attestation.md", ROOT / "action.yml",
                ROOT / "src/repro_gate/schemas/reproducibility-predicate.schema.json",
                *sorted((ROOT / "examples").rglob("*.yml"))]
    for path in named_in:
        text = path.read_text(encoding="utf-8")
        named = set(re.findall(r"https://repro-gate\.dev/[\w/.-]+", text))
        assert named <= {predicate.PREDICATE_TYPE}, path
    assert predicate.PREDICATE_TYPE in (ROOT / "docs/attestation.md").read_text(encoding="utf-8")
