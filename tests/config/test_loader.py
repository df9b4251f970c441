"""Loading `.repro-gate.yml`: finding and parsing the file, merging the overrides, checking
numbers, globs and credentials, and resolving paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro_gate import config
from repro_gate.config import loader
from repro_gate.errors import ConfigError


def write(directory: Path, text: str, name: str = ".repro-gate.yml") -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def load_error(directory: Path, text: str) -> str:
    write(directory, text)
    with pytest.raises(ConfigError) as raised:
        config.load(None, {}, directory)
    return raised.value.message


def test_the_yml_file_is_found_before_the_yaml_one(tmp_path: Path) -> None:
    assert loader.find_config_file(tmp_path) is None
    yaml_file = write(tmp_path, "runs: 3\n", ".repro-gate.yaml")
    assert loader.find_config_file(tmp_path) == yaml_file
    yml_file = write(tmp_path, "runs: 4\n")
    assert loader.find_config_file(tmp_path) == yml_file
    assert config.load(None, {}, tmp_path).runs == 4


def test_a_file_problem_is_one_line_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        loader.read_config_file(tmp_path / "missing.yml")

    broken = load_error(tmp_path, "runs: [1\n")
    assert "not valid YAML (line 2, column 1)" in broken and "\n" not in broken

    assert load_error(tmp_path, "- a\n- b\n").endswith(
        "must be a mapping of keys to values, not list")
    assert loader.read_config_file(write(tmp_path, "# only a comment\n")) == {}


def test_paths_from_the_file_start_at_its_folder_and_overrides_at_the_cwd(
    tmp_path: Path,
) -> None:
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    path = write(project, "workdir: .\ndata: [data]\nbaseline: old/manifest.json\n")

    loaded = config.load(path, {"output_dir": "out"}, cwd)

    assert loaded.workdir == project.resolve()
    assert loaded.data == (project.resolve() / "data",)
    assert loaded.baseline == project.resolve() / "old" / "manifest.json"
    assert loaded.output_dir == cwd.resolve() / "out"
    assert loaded.config_file == path.resolve()


def test_overrides_are_merged_into_the_sections_of_the_file(tmp_path: Path) -> None:
    write(tmp_path, "cost: {warmup: 7, blocks: 4}\nruns: 3\n")

    loaded = config.load(None, {"cost": {"blocks": 9}, "runs": 5}, tmp_path)

    assert (loaded.cost.warmup, loaded.cost.blocks, loaded.runs) == (7, 9, 5)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("timeout: .nan\n", "timeout: must be a finite number >= 0, got nan"),
        ("timeout: .inf\n", "timeout: must be a finite number >= 0, got inf"),
        ("timeout: 1.0e+13\n", "timeout: must be at most 1e+12"),
        ("runs: 1\n", "runs: must be an integer >= 2"),
        ("command: '  '\n", "command: must not be empty"),
        ("container: {env_allow: [GITHUB_TOKEN]}\n",
         "container.env_allow: GITHUB_TOKEN is a credential of the gate"),
        ("env: {ACTIONS_ID_TOKEN_REQUEST_TOKEN: x}\n",
         "env: ACTIONS_ID_TOKEN_REQUEST_TOKEN is a credential of the gate"),
        ("workdir: nowhere\n", "does not exist"),
        ("vary: threads,colour\n", "vary: must be a comma list or a list of threads, hostname,"
                                    " path, time, fileordering, all; or a mapping"),
    ],
)
def test_a_bad_value_is_refused_before_anything_runs(tmp_path: Path, text: str,
                                                     message: str) -> None:
    assert message in load_error(tmp_path, text)


def test_a_workdir_that_is_a_file_is_refused(tmp_path: Path) -> None:
    write(tmp_path, "x\n", "train.py")
    assert load_error(tmp_path, "workdir: train.py\n").endswith("is not a directory")


@pytest.mark.parametrize(
    ("glob", "problem"),
    [
        ("ckpt/**/*.pt", None),
        ("model.pt", None),
        ("./", "names no file"),
        ("/etc/passwd", "must be relative to the run directory"),
        ("~/secrets", "must be relative to the run directory"),
        ("C:\\Users\\x", "must be relative to the run directory"),
        ("ckpt/../../x", "'..' is not allowed"),
        ("ckpt**/x.pt", "'**' must be a whole path component"),
    ],
)
def test_artifact_globs_must_stay_inside_the_run(glob: str, problem: str | None) -> None:
    found = loader.artifact_glob_problem(glob)

    assert found is None if problem is None else problem in (found or "")


def test_a_bad_glob_in_the_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    assert load_error(tmp_path, "artifacts: ['../out/*.pt']\n") == (
        "artifacts: glob '../out/*.pt' must stay inside the run directory ('..' is not allowed)")


def test_a_recorded_section_is_checked_like_user_input() -> None:
    assert loader.recorded_section({"cost": {"blocks": 4}}, "cost", "old.json") == {"blocks": 4}
    assert loader.recorded_section(None, "cost", "old.json") == {}
    with pytest.raises(ConfigError, match=r"^old.json: config: cost.blocks: must be"):
        loader.recorded_section({"cost": {"blocks": "x"}}, "cost", "old.json")
