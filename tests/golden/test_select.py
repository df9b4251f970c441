"""Which golden file a run is compared with: a file named directly, or its machine class's file
in a folder; and paths shown as the repository reads them."""

from __future__ import annotations

from pathlib import Path

from repro_gate.config import Config
from repro_gate.config.model import GoldenConfig
from repro_gate.golden.select import Choice, choose, configured, is_folder, shown


def config(tmp_path: Path, golden: str) -> Config:
    return Config(workdir=tmp_path, output_dir=tmp_path / "out",
                  golden=GoldenConfig(path=golden))


def test_the_default_folder_holds_one_file_per_machine_class(tmp_path: Path) -> None:
    choice = choose(Config(workdir=tmp_path, output_dir=tmp_path / "out"), "gpu-h100-x8")
    folder = tmp_path / ".repro-gate" / "golden"
    assert choice == Choice(folder / "gpu-h100-x8.json", named=False, folder=folder)


def test_a_json_file_named_directly_is_compared_whatever_the_class(tmp_path: Path) -> None:
    choice = choose(config(tmp_path, "golden/main.json"), "cpu-amd-epyc")
    assert choice == Choice(tmp_path / "golden" / "main.json", named=True,
                            folder=tmp_path / "golden")


def test_an_absolute_path_is_kept_and_a_relative_one_is_under_the_workdir(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere" / "g.json"
    assert configured(config(tmp_path / "work", str(elsewhere))) == elsewhere
    assert configured(config(tmp_path, "g")) == tmp_path / "g"


def test_a_folder_exists_or_is_written_as_one(tmp_path: Path) -> None:
    (tmp_path / "odd.json").mkdir()
    assert is_folder(tmp_path / "odd.json", "odd.json")  # a directory, whatever its name
    assert is_folder(tmp_path / "new", "new/")
    assert is_folder(tmp_path / "goldens", "goldens")  # no .json suffix
    assert not is_folder(tmp_path / "new.json", "new.json")
    choice = choose(config(tmp_path, "odd.json"), "cpu-x")
    assert (choice.path, choice.named) == (tmp_path / "odd.json" / "cpu-x.json", False)


def test_paths_inside_the_root_are_shown_relative_and_others_as_they_are(tmp_path: Path) -> None:
    assert shown(tmp_path / "a" / "b.json", tmp_path) == "a/b.json"
    outside = Path("/somewhere/else.json")
    assert shown(outside, tmp_path) == str(outside)
