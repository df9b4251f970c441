"""The keys of container runs: image, GPUs, network and the `container` section."""

from __future__ import annotations

from pathlib import Path

from repro_gate import config
from repro_gate.cli.main import build_parser
from repro_gate.config import Config, overrides
from repro_gate.config.keys import container

BY_PATH = {entry.path: entry for entry in container.KEYS}
IMAGE = "registry.example/train@sha256:" + "0" * 64


def from_flags(tmp_path: Path, *argv: str) -> Config:
    return config.load(None, overrides.from_flags(build_parser().parse_args(["check", *argv])),
                       tmp_path)


def test_the_container_flags_set_the_container_settings(tmp_path: Path) -> None:
    loaded = from_flags(tmp_path, "--image", IMAGE, "--gpus", "0,1", "--network", "proxy",
                        "--memory", "16g", "--pids", "512", "--user", "1000:1000", "--keep",
                        "--env-allow", "HF_TOKEN", "--env-allow", "WANDB_MODE")

    assert loaded.container.image == IMAGE
    assert loaded.container.gpus == ("0", "1")
    assert (loaded.container.network, loaded.container.memory, loaded.container.pids) == (
        "proxy", "16g", 512)
    assert (loaded.container.user, loaded.container.keep) == ("1000:1000", True)
    assert loaded.container.env_allow == ("HF_TOKEN", "WANDB_MODE")


def test_gpus_take_a_count_all_or_none_from_an_input_as_from_a_flag(tmp_path: Path) -> None:
    for text, typed in (("2", 2), ("all", "all"), ("none", "none")):
        from_input = config.load(None, overrides.from_action_inputs({"INPUT_GPUS": text}),
                                 tmp_path)
        assert from_input.container.gpus == typed
        assert from_flags(tmp_path, "--gpus", text).container.gpus == typed


def test_the_limits_share_the_row_of_the_memory_limit() -> None:
    memory = BY_PATH["container.memory"]
    shared = [entry.path for entry in container.KEYS if entry.shares_row]

    assert memory.doc and not memory.shares_row
    assert shared == ["container.pids", "container.user", "container.keep",
                      "container.env_allow"]


def test_the_network_is_isolated_by_default_and_its_texts_say_so() -> None:
    network = BY_PATH["network"]

    assert network.default == "none"
    assert network.help.format(default=network.default) == (
        "container network (default none)")
    assert "Default `none`." in network.input_doc
