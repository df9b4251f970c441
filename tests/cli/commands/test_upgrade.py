"""`repro-gate upgrade`: the candidate lock chosen from the flags, and unclear flags refused
before any environment is built, with the error recorded in upgrade.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from repro_gate import validation
from repro_gate.cli.commands.upgrade import upgrade_options
from repro_gate.cli.main import build_parser, main
from repro_gate.errors import EXIT_ERROR, ConfigError
from repro_gate.upgrade.check import UpgradeOptions


def options_from(*argv: str) -> UpgradeOptions:
    return upgrade_options(build_parser().parse_args(["upgrade", *argv]))


def test_named_packages_are_upgraded_alone() -> None:
    options = options_from("--upgrade-package", "torch", "--upgrade-package", "numpy")

    assert options.candidate.lock is None
    assert options.candidate.request is not None
    assert options.candidate.request.packages == ("torch", "numpy")
    assert not options.candidate.request.everything
    assert options.write_lock is False


def test_upgrade_alone_upgrades_everything() -> None:
    options = options_from("--upgrade", "--write-lock")

    assert options.candidate.request is not None and options.candidate.request.everything
    assert options.write_lock is True


def test_a_given_candidate_lock_is_made_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)

    options = options_from("--candidate-lock", "pr/uv.lock")

    assert options.candidate.lock == tmp_path / "pr" / "uv.lock"
    assert options.candidate.request is None


@pytest.mark.parametrize(("argv", "message"), [
    ((), "nothing to compare: give --upgrade, --upgrade-package NAME or --candidate-lock PATH"),
    (("--candidate-lock", "x.lock", "--upgrade"),
     "--candidate-lock gives the candidate; --upgrade and --upgrade-package compute one:"
     " use one of them"),
    (("--upgrade", "--upgrade-package", "torch"),
     "--upgrade upgrades every package: leave out --upgrade-package"),
])
def test_unclear_candidates_are_refused(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        options_from(*argv)

    assert raised.value.message == message


def test_the_command_line_refusal_is_one_line_and_recorded_in_upgrade_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)

    code = main(["upgrade", "-o", "out", "--upgrade", "--upgrade-package", "torch", "--",
                 "python", "train.py"])

    assert code == EXIT_ERROR
    assert capsys.readouterr().err == ("repro-gate: error: --upgrade upgrades every package:"
                                       " leave out --upgrade-package\n")
    record = json.loads((tmp_path / "out" / "upgrade.json").read_text())
    assert validation.errors("upgrade", record) == []
    assert record["verdict"] == "error"
