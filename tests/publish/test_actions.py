"""GitHub Actions runtime conventions: outputs, job summary, workflow commands, action inputs."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from helpers.cost_manifests import cost, gate_manifest
from helpers.github_env import read_outputs
from helpers.workflow_commands import live_commands, window_tokens

from repro_gate.config.overrides import from_action_inputs as overrides_from_inputs
from repro_gate.errors import ConfigError
from repro_gate.publish import actions as github_actions


def manifest(workspace: Path, **changes: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "gate": "train",
        "verdict": "fail",
        "reasons": [{"code": "trajectory_diverged", "message": "runs differ from step 7"}],
        "output_dir": str(workspace / "repro-gate-out"),
        "config_hash": "ab" * 32,
        "comparison": {
            "basis": "bitwise",
            "artifacts": [],
            "trajectory": {"steps_compared": 9, "status": "different"},
            "first_divergence": {"step": 7, "parameters": ["fc.weight"], "runs": ["A", "B"]},
        },
        "cost": {"status": "measured", "pct": 12.3456, "ci95_pct": [10.1, 14.6],
                 "basis": "blocks", "det_step_seconds": 0.1, "default_step_seconds": 0.089},
        "nondeterministic_ops": [
            {"op": "index_add_cuda_", "file": str(workspace / "model.py"), "line": 88, "count": 3,
             "message": "index_add_cuda_ does not have a deterministic implementation"},
            {"op": "scatter_add_cuda_", "file": "/usr/lib/python3/site-packages/torch/x.py",
             "line": 5, "count": 1},
            {"op": "cumsum_cuda_kernel", "file": None, "line": None, "count": 1},
        ],
        "runs": [],
    }
    document.update(changes)
    return document


def actions_env(tmp_path: Path, workspace: Path) -> dict[str, str]:
    return {
        "GITHUB_ACTIONS": "true",
        "GITHUB_OUTPUT": str(tmp_path / "output"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"),
        "GITHUB_WORKSPACE": str(workspace),
    }


def test_publish_writes_outputs_summary_and_annotations(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    environ = actions_env(tmp_path, workspace)
    stream = io.StringIO()

    github_actions.publish(manifest(workspace), environ, stream=stream)

    assert read_outputs(tmp_path / "output") == {
        "verdict": "fail",
        "cost-pct": "12.35",
        "cost-status": "measured",
        "config-hash": "ab" * 32,
        "manifest-path": str(workspace / "repro-gate-out" / "manifest.json"),
        "first-divergent-step": "7",
    }
    summary = (tmp_path / "summary").read_text(encoding="utf-8")
    assert summary.startswith("### ❌ train: not reproducible · first divergence at step 7")
    assert "**Verdict:** fail" in summary
    # Only the op attributed to a file of the repository becomes an annotation.
    assert stream.getvalue().splitlines() == [
        "::error file=model.py,line=88,title=nondeterministic op%3A index_add_cuda_::"
        "index_add_cuda_ does not have a deterministic implementation (3x)"
    ]


def test_publish_outside_actions_does_nothing(tmp_path: Path) -> None:
    environ = actions_env(tmp_path, tmp_path)
    environ["GITHUB_ACTIONS"] = "false"
    stream = io.StringIO()

    github_actions.publish(manifest(tmp_path), environ, stream=stream)

    assert not (tmp_path / "output").exists()
    assert not (tmp_path / "summary").exists()
    assert stream.getvalue() == ""


def test_publish_never_raises_and_goes_on_after_a_failure(tmp_path: Path) -> None:
    environ = actions_env(tmp_path, tmp_path)
    environ["GITHUB_OUTPUT"] = str(tmp_path)  # a directory: the output cannot be written
    stream = io.StringIO()

    github_actions.publish(manifest(tmp_path, verdict="pass", reasons=[]), environ, stream=stream)

    assert stream.getvalue().startswith("::warning::repro-gate: could not publish to Actions: ")
    assert "**Verdict:** pass" in (tmp_path / "summary").read_text(encoding="utf-8")


def test_empty_values_for_what_the_run_did_not_measure(tmp_path: Path) -> None:
    document = manifest(tmp_path, verdict="error", cost=None, nondeterministic_ops=[])
    document["comparison"]["first_divergence"] = None
    del document["config_hash"], document["output_dir"]

    outputs = github_actions.outputs_for(document, None)

    assert outputs == {"verdict": "error", "cost-pct": "", "cost-status": "", "config-hash": "",
                       "manifest-path": "", "first-divergent-step": ""}


def test_an_inconclusive_cost_leaves_cost_pct_empty(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    inconclusive = {"status": "inconclusive", "reason": "only 2 block pairs were timed",
                    "pct": 12.3456, "ci95_pct": [-20.0, 40.0], "basis": "blocks"}

    github_actions.publish(manifest(workspace, cost=inconclusive), actions_env(tmp_path, workspace))

    outputs = read_outputs(tmp_path / "output")
    assert (outputs["cost-pct"], outputs["cost-status"]) == ("", "inconclusive")
    assert "12.3" not in (tmp_path / "summary").read_text(encoding="utf-8")


def test_a_gate_over_its_cost_budget_says_so_on_the_step(tmp_path: Path) -> None:
    over = cost(14.2, [12.0, 16.4], budget={"max_pct": 10.0, "status": "over"})
    document = gate_manifest(over, reproducible=True)
    environ = actions_env(tmp_path, tmp_path / "ws")
    stream = io.StringIO()

    github_actions.publish(document, environ, stream=stream)

    outputs = read_outputs(tmp_path / "output")
    assert (outputs["verdict"], outputs["cost-pct"], outputs["cost-status"]) == (
        "fail", "14.20", "measured")
    # `%` is escaped as `%25` in a workflow command; the runner shows `%`.
    assert stream.getvalue().splitlines() == [
        "::error title=repro-gate%3A cost of determinism over budget::the cost of determinism,"
        " +14.2%25 (95%25 interval +12.0%25 to +16.4%25, 6 block pairs), is over the 10%25"
        " budget: the whole interval lies above it"
    ]


def test_multiline_output_survives_a_value_that_looks_like_a_delimiter(tmp_path: Path) -> None:
    path = tmp_path / "output"
    value = "line 1\nghadelimiter_x\n<<EOF\nlast"
    github_actions.set_outputs({"text": value, "plain": "v"}, {"GITHUB_OUTPUT": str(path)})

    assert read_outputs(path) == {"text": value, "plain": "v"}


def test_summary_is_cut_at_a_line_below_one_mebibyte() -> None:
    line = "| row | é |\n"
    markdown = line * (github_actions.SUMMARY_LIMIT_BYTES // len(line.encode()) + 100)

    fitted = github_actions.fit_summary(markdown)

    assert len(fitted.encode("utf-8")) <= github_actions.SUMMARY_LIMIT_BYTES
    body, note = fitted.rsplit("\n\n", 1)
    assert set(body.split("\n")) == {line.rstrip("\n")}
    assert note.startswith("_Summary truncated")
    assert github_actions.fit_summary("small\n") == "small\n"


def test_workflow_commands_escape_their_data_and_properties() -> None:
    line = github_actions.command("error", "50% of\nruns", file="a,b.py", title="x: y")

    assert line == "::error file=a%2Cb.py,title=x%3A y::50%25 of%0Aruns"


def test_annotations_stop_at_the_per_step_limit(tmp_path: Path) -> None:
    ops = [
        {"op": f"op{i}", "file": "model.py", "line": i + 1, "count": 1} for i in range(15)
    ]

    lines = github_actions.op_annotations({"nondeterministic_ops": ops}, str(tmp_path))

    assert len(lines) == github_actions.MAX_ERROR_ANNOTATIONS
    assert lines[0].startswith("::error file=model.py,line=1,")


def test_mask_and_group_commands() -> None:
    stream = io.StringIO()
    github_actions.add_mask("s3cret\nsecond line", stream)
    with github_actions.group("run A", stream=stream):
        stream.write("inside\n")

    assert stream.getvalue().splitlines() == [
        "::add-mask::s3cret", "::add-mask::second line", "::group::run A", "inside",
        "::endgroup::",
    ]


def test_annotations_show_control_characters_as_escapes() -> None:
    line = github_actions.annotation("error", "differs at x\n::notice::PASS\x1b[0m",
                                     file="model.py", line=3, title="op: a\tb", col=None)

    assert line == ("::error file=model.py,line=3,title=op%3A a\\tb::"
                    "differs at x\\n::notice::PASS\\x1b[0m")
    assert live_commands(line) == [line]


def test_inside_the_window_text_is_inert_and_the_gates_own_commands_are_live(
    capsys: pytest.CaptureFixture[str],
) -> None:
    error = github_actions.annotation("error", "ops differ", title="repro-gate")
    with github_actions.commands_stopped():
        print("  ::notice title=repro-gate::PASS reproducible")
        print("a file named ##[warning]forged")
        github_actions.emit_all([error, "::endgroup::"])
        print("::set-output name=verdict::pass")

    log = capsys.readouterr().out
    first, second = window_tokens(log)
    assert log.splitlines() == [
        f"::stop-commands::{first}",
        "  ::notice title=repro-gate::PASS reproducible",
        "a file named ##[warning]forged",
        f"::{first}::",
        error,
        "::endgroup::",
        f"::stop-commands::{second}",
        "::set-output name=verdict::pass",
        f"::{second}::",
    ]
    assert len(first) == len(second) == 32 and first != second
    assert live_commands(log) == [f"::stop-commands::{first}", f"::{first}::", error,
                                  "::endgroup::", f"::stop-commands::{second}", f"::{second}::"]


def test_the_gates_annotations_stay_live_inside_the_actions_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    workspace = tmp_path / "ws"
    named = manifest(workspace, nondeterministic_ops=[
        {"op": "index_add_cuda_\n::notice::forged", "file": str(workspace / "model.py"),
         "line": 88, "count": 3}])

    with github_actions.commands_stopped():
        print("[A] ::error::forged by the training")
        github_actions.publish(named, actions_env(tmp_path, workspace))

    annotations = [line for line in live_commands(capsys.readouterr().out)
                   if line.startswith(("::error", "::notice"))]
    assert annotations == [
        "::error file=model.py,line=88,title=nondeterministic op%3A index_add_cuda_\\n%3A%3A"
        "notice%3A%3Aforged::index_add_cuda_\\n::notice::forged has no deterministic"
        " implementation (3x)"]


def test_a_window_opened_inside_another_adds_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    with github_actions.commands_stopped():
        with github_actions.commands_stopped():
            print("inside")
        print("still inside")
    github_actions.emit("::endgroup::")  # after the window: written as it is

    log = capsys.readouterr().out
    [token] = window_tokens(log)
    assert log.splitlines() == [f"::stop-commands::{token}", "inside", "still inside",
                                f"::{token}::", "::endgroup::"]


def test_commands_written_to_another_stream_leave_the_window_alone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    other = io.StringIO()
    with github_actions.commands_stopped():
        github_actions.emit("::endgroup::", other)

    assert other.getvalue() == "::endgroup::\n"
    assert len(capsys.readouterr().out.splitlines()) == 2


def test_action_inputs_become_config_overrides() -> None:
    environ = {
        "INPUT_IMAGE": " ghcr.io/o/train@sha256:" + "a" * 64 + " ",
        "INPUT_COMMAND": "python train.py --epochs 1",
        "INPUT_GPUS": "GPU-1234, GPU-5678",
        "INPUT_ARTIFACTS": "checkpoints/*.pt\nmetrics.json, logs/*.json",
        "INPUT_RUNS": "3",
        "INPUT_TIMEOUT": "90.5",
        "INPUT_TOLERANCE": "atol=1e-6,rtol=0",
        "INPUT_NETWORK": "",
        "INPUT_PUSHGATEWAY-URL": "http://pg:9091",
        "INPUT_GITHUB-TOKEN": "ghs_x",
    }

    assert overrides_from_inputs(environ) == {
        "image": "ghcr.io/o/train@sha256:" + "a" * 64,
        "command": "python train.py --epochs 1",
        "gpus": ["GPU-1234", "GPU-5678"],
        "artifacts": ["checkpoints/*.pt", "metrics.json", "logs/*.json"],
        "runs": 3,
        "timeout": 90.5,
        "tolerance": {"atol": 1e-6, "rtol": 0.0},
        "metrics": {"pushgateway_url": "http://pg:9091"},
    }
    assert overrides_from_inputs({"INPUT_GPUS": "2"}) == {"gpus": 2}
    assert overrides_from_inputs({"INPUT_GPUS": "none"}) == {"gpus": "none"}


def test_the_seed_input_is_an_opt_in() -> None:
    """Empty (the default): no `seed` key, so the gate seeds nothing; a number: the gate seeds."""
    assert "seed" not in overrides_from_inputs({"INPUT_SEED": ""})
    assert overrides_from_inputs({"INPUT_SEED": " 3 "}) == {"seed": 3}
    with pytest.raises(ConfigError, match=r"^input seed: must be a number, got 'zero'$"):
        overrides_from_inputs({"INPUT_SEED": "zero"})


def test_a_bad_input_is_one_clear_line() -> None:
    with pytest.raises(ConfigError, match=r"^input timeout: must be a number, got 'soon'$"):
        overrides_from_inputs({"INPUT_TIMEOUT": "soon"})
