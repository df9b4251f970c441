"""The published schemas (`schemas/`) validate what the commands write, with standard tools.

An auditor runs `check-jsonschema --schemafile schemas/X.schema.json DOCUMENT` on a checkout:
every `$ref` must resolve from the files alone, with no network and no repro-gate code.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers.check_jsonschema import CHECK_JSONSCHEMA, OFFLINE
from helpers.gate_cli import check, script
from helpers.paths import ROOT, TRAININGS
from referencing import Registry, Resource

from repro_gate import validation

SCHEMAS = Path("schemas")  # relative to ROOT: the published layout (a symlink into the package)


def schema_files() -> list[Path]:
    return sorted((ROOT / SCHEMAS).glob("*.schema.json"))


def validate(schema: str, instance: Path) -> None:
    """`check-jsonschema --schemafile schemas/<schema> <instance>` from the repository root."""
    completed = subprocess.run(
        [CHECK_JSONSCHEMA, "--no-cache", "--schemafile", str(SCHEMAS / schema), str(instance)],
        cwd=ROOT, env={**os.environ, **OFFLINE}, capture_output=True, text=True, timeout=120,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


def repro_gate(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "repro_gate", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=240)


def write_output(path: Path, completed: subprocess.CompletedProcess[str]) -> Path:
    json.loads(completed.stdout)  # the command printed one JSON document
    path.write_text(completed.stdout)
    return path


def refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [ref for value in node.values() for ref in refs(value)]
    if isinstance(node, list):
        return [ref for value in node for ref in refs(value)]
    return []


def pointed(document: Any, pointer: str) -> bool:
    for part in filter(None, pointer.split("/")):
        key = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(document, dict) or key not in document:
            return False
        document = document[key]
    return True


@pytest.fixture(scope="module")
def gate_output(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output directory of one real `repro-gate check` of a tiny deterministic training."""
    project = tmp_path_factory.mktemp("project")
    for training in TRAININGS.glob("*.py"):
        shutil.copy(training, project / training.name)
    result = check(project, "--no-cost", *script("deterministic.py"))
    assert result.exit_code == 0, result.stdout + result.stderr
    return project / "repro-gate-out"


@pytest.mark.parametrize("path", schema_files(), ids=lambda p: p.name)
def test_every_ref_is_local_or_a_sibling_file(path: Path) -> None:
    document = json.loads(path.read_text())
    assert "$id" not in document, "an $id would replace the file's location as the base URI"
    for ref in refs(document):
        target, _, pointer = ref.partition("#")
        resolved = document
        if target:
            assert re.fullmatch(r"[a-z0-9-]+\.schema\.json", target), f"{ref}: not a file name"
            assert (ROOT / SCHEMAS / target).is_file(), f"{ref}: no such file in schemas/"
            resolved = json.loads((ROOT / SCHEMAS / target).read_text())
        assert pointed(resolved, pointer), f"{ref}: nothing at #{pointer}"


@pytest.mark.parametrize("path", schema_files(), ids=lambda p: p.name)
def test_every_schema_is_valid_2020_12(path: Path) -> None:
    """`check-jsonschema --check-metaschema`: each file is a valid schema, offline."""
    completed = subprocess.run(
        [CHECK_JSONSCHEMA, "--no-cache", "--check-metaschema", str(SCHEMAS / path.name)],
        cwd=ROOT, env={**os.environ, **OFFLINE}, capture_output=True, text=True, timeout=120,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_the_manifest_of_a_real_check(gate_output: Path) -> None:
    validate("manifest.schema.json", gate_output / "manifest.json")


def test_the_attestation_predicate_of_a_real_check(gate_output: Path) -> None:
    validate("reproducibility-predicate.schema.json", gate_output / "predicate.json")


def test_plain_jsonschema_resolves_the_files_too(gate_output: Path) -> None:
    """The recipe in schemas/README.md: a registry that reads sibling files, nothing else."""
    folder = ROOT / SCHEMAS

    def retrieve(uri: str) -> Resource:
        return Resource.from_contents(json.loads((folder / uri).read_text()))

    schema = json.loads((folder / "manifest.schema.json").read_text())
    validator = jsonschema.Draft202012Validator(schema, registry=Registry(retrieve=retrieve))
    manifest = json.loads((gate_output / "manifest.json").read_text())
    assert [error.message for error in validator.iter_errors(manifest)] == []
    manifest["fingerprint"]["format"] = 2
    assert [error.message for error in validator.iter_errors(manifest)] == ["1 was expected"]


def test_compare_json_output(gate_output: Path, tmp_path: Path) -> None:
    completed = repro_gate(gate_output, "compare", "--json", "runs/A", "runs/B")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    validate("compare-document.schema.json", write_output(tmp_path / "compare.json", completed))


def test_fingerprint_and_diff_json_output(gate_output: Path, tmp_path: Path) -> None:
    completed = repro_gate(tmp_path, "fingerprint", "--json")
    assert completed.returncode == 0, completed.stderr
    fingerprint = write_output(tmp_path / "fingerprint.json", completed)
    validate("fingerprint-document.schema.json", fingerprint)
    assert validation.errors("fingerprint-document", json.loads(fingerprint.read_text())) == []

    completed = repro_gate(tmp_path, "diff", "--json", str(gate_output / "manifest.json"),
                           str(fingerprint))
    assert completed.returncode in (0, 1), completed.stderr
    validate("environment-diff.schema.json", write_output(tmp_path / "diff.json", completed))


def test_doctor_json_output(tmp_path: Path) -> None:
    project = tmp_path / "clean"
    shutil.copytree(ROOT / "tests" / "fixtures" / "projects" / "clean", project)
    completed = repro_gate(project, "doctor", "--json")
    assert completed.returncode in (0, 1), completed.stderr
    validate("doctor-document.schema.json", write_output(tmp_path / "doctor.json", completed))


def readme_config_example() -> str:
    """The `.repro-gate.yml` example under the README's Configuration heading."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Configuration", 1)[1]
    return section.split("```yaml\n", 1)[1].split("```", 1)[0]


def test_config_files(tmp_path: Path) -> None:
    example = tmp_path / "readme" / ".repro-gate.yml"
    example.parent.mkdir()
    example.write_text(readme_config_example())
    validate("config.schema.json", example)
    for project in ("clean", "sloppy"):
        validate("config.schema.json",
                 ROOT / "tests" / "fixtures" / "projects" / project / ".repro-gate.yml")
    example.write_text("runs: 1\n")
    with pytest.raises(AssertionError, match="runs"):
        validate("config.schema.json", example)
