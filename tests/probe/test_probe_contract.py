"""The gate and the injected probe agree on their contract: variable names, files, exit code.

The probe keeps its own copies of the constants in `repro_gate.probe` (it must not import
repro_gate), so these tests read the probe's values from its modules, in a separate interpreter,
and compare them with the gate's.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from typing import Any

import pytest

from repro_gate import probe

# Constants of the gate's side that the probe never reads.
GATE_ONLY: set[str] = set()
# Constants of the probe's side that the gate never sees.
PROBE_ONLY = {"ENV_OWNER_PID"}
# Read in a fresh interpreter (no site, no PYTHONPATH), so nothing leaks into the test process.
READ_PROBE_MODULES = """
import json, sys
sys.path.insert(0, sys.argv[1])
import _repro_gate_contract, _repro_gate_fingerprint, _repro_gate_probe
def constants(module):
    return {k: v for k, v in vars(module).items() if k.isupper() and isinstance(v, (str, int))}
print(json.dumps({
    "contract": constants(_repro_gate_contract),
    "probe": constants(_repro_gate_probe),
    "fingerprint": constants(_repro_gate_fingerprint),
    "heavy_imports": sorted(m for m in ("torch", "numpy") if m in sys.modules),
}))
"""


def is_contract_name(name: str) -> bool:
    """The names that make up the contract: variables, files, the run subdirectory, exit code."""
    return (
        name.startswith("ENV_")
        or name.endswith("_FILE")
        or name
        in (
            "PROBE_SUBDIR",
            "STOP_EXIT_CODE",
        )
    )


def gate_contract() -> dict[str, Any]:
    """The contract constants of `repro_gate.probe`."""
    return {k: v for k, v in vars(probe).items() if k.isupper() and is_contract_name(k)}


@pytest.fixture(scope="module")
def probe_side() -> dict[str, Any]:
    """Constants of the probe's modules, imported the way sitecustomize imports them."""
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", READ_PROBE_MODULES, str(probe.INJECT_DIR)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_contract_is_not_empty() -> None:
    assert {"ENV_RUN_DIR", "TRAJECTORY_FILE", "PROBE_SUBDIR", "STOP_EXIT_CODE"} <= set(
        gate_contract()
    )


def test_every_gate_constant_has_the_same_value_in_the_probe(probe_side: dict[str, Any]) -> None:
    expected = {k: v for k, v in gate_contract().items() if k not in GATE_ONLY}
    theirs = {k: probe_side["contract"].get(k) for k in expected}
    assert theirs == expected


def test_the_probe_has_no_contract_constant_the_gate_lacks(probe_side: dict[str, Any]) -> None:
    probe_names = {k for k in probe_side["contract"] if is_contract_name(k)} - PROBE_ONLY
    assert probe_names <= set(gate_contract())


def test_the_probe_uses_the_contract_module(probe_side: dict[str, Any]) -> None:
    """The probe's own module and the fingerprint module see the same values as the contract."""
    for module in ("probe", "fingerprint"):
        shared = probe_side["contract"].keys() & probe_side[module].keys()
        assert {k: probe_side[module][k] for k in shared} == {
            k: probe_side["contract"][k] for k in shared
        }
    assert probe_side["fingerprint"]["ENV_SEED"] == probe.ENV_SEED


def test_sitecustomize_gates_the_probe_on_the_run_directory_variable() -> None:
    """sitecustomize reads the variable by its literal name (it stays import-free and cheap)."""
    tree = ast.parse((probe.INJECT_DIR / "sitecustomize.py").read_text(encoding="utf-8"))
    literals = {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "get"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    }
    assert literals == {probe.ENV_RUN_DIR}


def test_importing_the_probe_imports_neither_torch_nor_numpy(probe_side: dict[str, Any]) -> None:
    assert probe_side["heavy_imports"] == []
