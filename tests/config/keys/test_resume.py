"""The resume check's keys: the config file, flags and action inputs give one configuration."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro_gate import config, validation
from repro_gate.cli.main import build_parser
from repro_gate.config import Config, ResumeConfig, overrides
from repro_gate.errors import ConfigError


def test_flags_and_action_inputs_set_the_same_resume_check(tmp_path: Path) -> None:
    args = build_parser().parse_args(["check", "--resume-after", "100",
                                      "--resume-command", "python train.py --resume"])
    inputs = {"INPUT_RESUME-AFTER": "100", "INPUT_RESUME-COMMAND": "python train.py --resume"}

    from_flags = config.load(None, overrides.from_flags(args), tmp_path)
    from_inputs = config.load(None, overrides.from_action_inputs(inputs), tmp_path)

    assert from_flags == from_inputs
    assert from_flags.resume == ResumeConfig(100, "python train.py --resume")


def test_the_resume_check_is_off_unless_configured_and_reads_back_the_same(
    tmp_path: Path,
) -> None:
    assert config.load(None, {}, tmp_path).resume is None
    assert "resume" not in config.load(None, {}, tmp_path).as_document()
    (tmp_path / ".repro-gate.yml").write_text("resume:\n  after: 3\n")
    loaded = config.load(None, {}, tmp_path)
    assert loaded.resume == ResumeConfig(3, None)  # the training's own command resumes
    document = loaded.as_document()
    assert document["resume"] == {"after": 3}
    assert validation.errors("config", {k: v for k, v in document.items()
                                        if k != "config_file"}) == []
    assert Config.from_document(document) == loaded


@pytest.mark.parametrize("text", ["resume:\n  after: 0\n", "resume:\n  command: python t.py\n",
                                  "resume:\n  after: 2\n  every: 3\n"])
def test_a_bad_resume_section_is_a_configuration_error(tmp_path: Path, text: str) -> None:
    (tmp_path / ".repro-gate.yml").write_text(text)
    with pytest.raises(ConfigError):
        config.load(None, {}, tmp_path)
