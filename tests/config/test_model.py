"""The typed configuration: one load path for the file, the flags and the action's inputs."""

from __future__ import annotations

from pathlib import Path

from repro_gate import config, validation
from repro_gate.cli.main import build_parser
from repro_gate.config import Config, overrides

CONFIG_FILE = """\
name: lm
command: python train.py --epochs 1
artifacts: ["ckpt/*.pt"]
seed: 7
tolerance: {atol: 1.0e-6, per_artifact: [{glob: "*.json", rtol: 0.01}]}
env: {CUBLAS_WORKSPACE_CONFIG: ":16:8"}
cost: {warmup: 5}
image: registry.example/train@sha256:%s
container: {memory: 16g, env_allow: [HF_TOKEN]}
report: {status: always}
metrics: {runner_slot: gpu-1}
""" % ("0" * 64)


def test_the_file_becomes_typed_sections_with_every_default_filled(tmp_path: Path) -> None:
    (tmp_path / ".repro-gate.yml").write_text(CONFIG_FILE)

    loaded = config.load(None, {}, tmp_path)

    assert loaded.command == "python train.py --epochs 1"  # a string: run by /bin/sh -c
    assert loaded.workdir == tmp_path.resolve()
    assert loaded.output_dir == (tmp_path / "repro-gate-out").resolve()
    assert loaded.tolerance.atol == 1e-6 and not loaded.tolerance.bitwise
    assert loaded.tolerance.per_artifact[0].rtol == 0.01
    assert (loaded.cost.warmup, loaded.cost.enabled, loaded.cost.steps) == (5, True, 0)
    assert loaded.container.memory == "16g" and loaded.container.env_allow == ("HF_TOKEN",)
    assert loaded.container.pids == 4096 and loaded.container.gpus is None
    assert (loaded.report.status, loaded.report.comment) == ("always", True)
    assert (loaded.metrics.runner_slot, loaded.metrics.job) == ("gpu-1", "repro-gate")


def test_the_recorded_configuration_is_valid_config_and_reads_back_the_same(
    tmp_path: Path,
) -> None:
    (tmp_path / ".repro-gate.yml").write_text(CONFIG_FILE)
    loaded = config.load(None, {}, tmp_path)

    document = loaded.as_document()

    assert document["config_file"] == str((tmp_path / ".repro-gate.yml").resolve())
    as_user_input = {key: value for key, value in document.items() if key != "config_file"}
    assert validation.errors("config", as_user_input) == []
    assert Config.from_document(document) == loaded


def test_flags_and_action_inputs_give_the_same_configuration(tmp_path: Path) -> None:
    args = build_parser().parse_args([
        "check", "--runs", "3", "--gpus", "0,1", "--tolerance", "atol=1e-6,rtol=0",
        "-a", "a.pt", "-a", "b.pt", "--pushgateway-url", "http://gw:9091",
        "--command", "python train.py",
    ])
    inputs = {
        "INPUT_RUNS": "3", "INPUT_GPUS": "0, 1", "INPUT_TOLERANCE": "atol=1e-6,rtol=0",
        "INPUT_ARTIFACTS": "a.pt\nb.pt", "INPUT_PUSHGATEWAY-URL": "http://gw:9091",
        "INPUT_COMMAND": "python train.py",
    }

    from_flags = config.load(None, overrides.from_flags(args), tmp_path)
    from_inputs = config.load(None, overrides.from_action_inputs(inputs), tmp_path)

    assert from_flags == from_inputs
    assert from_flags.container.gpus == ("0", "1")
    assert from_flags.runs == 3 and from_flags.artifacts == ("a.pt", "b.pt")


def test_flags_win_over_the_file(tmp_path: Path) -> None:
    (tmp_path / ".repro-gate.yml").write_text(CONFIG_FILE)
    args = build_parser().parse_args(["check", "--seed", "9", "--cost-warmup", "1"])

    loaded = config.load(None, overrides.from_flags(args), tmp_path)

    assert loaded.seed == 9
    assert loaded.cost.warmup == 1
    assert loaded.name == "lm"


def test_seed_is_an_opt_in_absent_or_null_by_default(tmp_path: Path) -> None:
    """The gate seeds nothing unless `seed` is set: absent and null both mean none."""
    assert config.load(None, {}, tmp_path).seed is None
    assert "seed" not in config.load(None, {}, tmp_path).as_document()
    (tmp_path / ".repro-gate.yml").write_text("seed: null\n")
    assert config.load(None, {}, tmp_path).seed is None
    args = build_parser().parse_args(["check", "--seed", "3"])
    assert config.load(None, overrides.from_flags(args), tmp_path).seed == 3
