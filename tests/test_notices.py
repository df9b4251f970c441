"""Inner layers never print: their notices go through `repro_gate.notices`, whose sink the
command line chooses; only cli/ writes to the terminal."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import repro_gate
from repro_gate import notices

PACKAGE = Path(repro_gate.__file__).parent
# Programs of their own, run in another process, that cannot import repro_gate: the probe (in
# the user's training), the job-started hook (in the runner's container) and the reference
# training (run as the training). What they print is their own process's output.
OWN_PROGRAMS = ("probe/inject/", "runner/_repro_gate_job_started.py",
                "reference/repro_gate_reference.py", "launch/run_init.py")


def print_calls(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id == "print"]


def test_no_module_outside_cli_prints() -> None:
    printing = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if name.startswith("cli/") or name.startswith(OWN_PROGRAMS):
            continue
        if lines := print_calls(path):
            printing[name] = lines
    assert printing == {}


def test_the_check_sees_a_print(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text("import sys\n\ndef f():\n    print('x', file=sys.stderr)\n")
    assert print_calls(module) == [4]


def test_notices_go_to_the_sink_the_command_line_chose(
    capsys: pytest.CaptureFixture[str],
) -> None:
    lines: list[str] = []
    with notices.sent_to(lines.append):
        notices.warning("reporting failed")
        notices.error("not written")
        notices.say("waiting for another repro-gate")
    notices.warning("after the block")

    assert lines == ["repro-gate: warning: reporting failed", "repro-gate: error: not written",
                     "repro-gate: waiting for another repro-gate"]
    assert capsys.readouterr().err == "repro-gate: warning: after the block\n"
