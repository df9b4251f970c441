"""Environments come from where the lock and the project say, by real uv on real local
indexes: a `[[tool.uv.index]]` served over HTTP on loopback (with a password), a find-links
folder, a requirements file's `--index-url` and `--hash`, `-e` lines; what cannot be honoured
is refused in one line naming the file and line."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.local_indexes import SimpleIndex, make_wheel, serving, sha256_of
from helpers.upgrade_index import env_python_value, uv

from repro_gate.environments import LocalEnvironments, read_lock
from repro_gate.environments.virtualenvs import ENV_MARKER, PINS_FILE
from repro_gate.errors import ErrorKind, GateError

SECRET = "s3cret-token-9"


@pytest.fixture
def online(uv_session: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """uv may reach the loopback index (the session is offline otherwise)."""
    monkeypatch.delenv("UV_OFFLINE", raising=False)


@pytest.fixture
def private_index(tmp_path: Path, online: None) -> Iterator[SimpleIndex]:
    wheels = tmp_path / "served"
    make_wheel(wheels, "rgsrc-alpha", "1.0", "VALUE = 1\n")
    with serving(SimpleIndex(wheels, credentials=("reader", SECRET))) as index:
        yield index


def lock_project(project: Path, pyproject: str) -> Path:
    project.mkdir(parents=True, exist_ok=True)
    (project / "pyproject.toml").write_text(pyproject)
    completed = subprocess.run([uv(), "lock"], cwd=project, capture_output=True, text=True,
                               check=False, timeout=120)
    assert completed.returncode == 0, completed.stderr
    return project / "uv.lock"


def everything_written(root: Path) -> str:
    return "".join(path.read_text(errors="replace") for path in root.rglob("*")
                   if path.is_file() and path.suffix in ("", ".txt", ".json", ".lock", ".cfg"))


def test_a_uv_index_is_the_only_place_its_packages_come_from_with_the_password_kept_out(
        tmp_path: Path, private_index: SimpleIndex, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UV_INDEX_PRIVATE_USERNAME", "reader")
    monkeypatch.setenv("UV_INDEX_PRIVATE_PASSWORD", SECRET)
    url = private_index.url(with_credentials=False)  # uv takes the password from UV_INDEX_*
    lock_path = lock_project(tmp_path / "project", (
        '[project]\nname = "trainer"\nversion = "0.1.0"\nrequires-python = ">=3.10"\n'
        'dependencies = ["rgsrc-alpha==1.0"]\n\n'
        f'[[tool.uv.index]]\nname = "private"\nurl = "{url}"\n'
        'explicit = true\n\n[tool.uv.sources]\nrgsrc-alpha = { index = "private" }\n'))
    private_index.requests.clear()
    lock = read_lock(lock_path)

    environment = LocalEnvironments(tmp_path / "envs", sources=lock.sources)(lock.pins())

    assert env_python_value(environment.python, "rgsrc_alpha.VALUE", "rgsrc_alpha") == "1"
    assert "/simple/rgsrc-alpha/" in private_index.requests
    assert "/files/rgsrc_alpha-1.0-py3-none-any.whl" in private_index.requests
    kept = everything_written(environment.path)
    assert SECRET not in kept
    assert "--index-url http://reader:***@127.0.0.1" in (environment.path / PINS_FILE).read_text()


def test_a_find_links_folder_of_the_project_gives_a_local_version(
        tmp_path: Path, uv_session: None) -> None:
    project = tmp_path / "project"
    make_wheel(tmp_path / "wheels", "cpubuild", "2.13.0+cpu")
    lock_path = lock_project(project, (
        '[project]\nname = "trainer"\nversion = "0.1.0"\nrequires-python = ">=3.10"\n'
        'dependencies = ["cpubuild==2.13.0+cpu"]\n\n'
        '[tool.uv]\nfind-links = ["../wheels"]\nno-index = true\n'))
    lock = read_lock(lock_path)

    environment = LocalEnvironments(tmp_path / "envs", sources=lock.sources)(lock.pins())

    assert lock.pins() == {"cpubuild": "2.13.0+cpu"}
    assert env_python_value(environment.python, "cpubuild.VERSION", "cpubuild") == "2.13.0+cpu"


def test_a_requirements_index_url_is_used_and_its_hashes_enforced(
        tmp_path: Path, private_index: SimpleIndex) -> None:
    project = tmp_path / "project"
    project.mkdir()
    right = sha256_of(private_index.wheels / "rgsrc_alpha-1.0-py3-none-any.whl")
    lock_path = project / "requirements.txt"
    lock_path.write_text(f"--index-url {private_index.url()}\n"
                         f"rgsrc-alpha==1.0 \\\n    --hash=sha256:{right}\n")
    lock = read_lock(lock_path)

    environment = LocalEnvironments(tmp_path / "envs", sources=lock.sources)(lock.pins())

    assert env_python_value(environment.python, "rgsrc_alpha.VALUE", "rgsrc_alpha") == "1"
    assert "/files/rgsrc_alpha-1.0-py3-none-any.whl" in private_index.requests
    assert SECRET not in everything_written(environment.path)

    lock_path.write_text(f"--index-url {private_index.url()}\n"
                         f"rgsrc-alpha==1.0 --hash=sha256:{'0' * 64}\n")
    wrong = read_lock(lock_path)
    with pytest.raises(GateError) as raised:
        LocalEnvironments(tmp_path / "envs", sources=wrong.sources)(wrong.pins())
    assert raised.value.kind == ErrorKind.ENVIRONMENT
    assert "hash" in raised.value.message.lower()
    assert SECRET not in raised.value.message and "\n" not in raised.value.message


def test_an_unknown_index_version_fails_with_the_password_masked(
        tmp_path: Path, private_index: SimpleIndex) -> None:
    lock_path = tmp_path / "requirements.txt"
    lock_path.write_text(f"--index-url {private_index.url()}\nrgsrc-alpha==7.0\n")
    lock = read_lock(lock_path)

    with pytest.raises(GateError) as raised:
        LocalEnvironments(tmp_path / "envs", sources=lock.sources)(lock.pins())

    assert raised.value.kind == ErrorKind.ENVIRONMENT
    assert "rgsrc-alpha" in raised.value.message
    assert SECRET not in raised.value.message


def test_an_editable_line_inside_the_project_is_installed(
        tmp_path: Path, uv_session: None) -> None:
    project = tmp_path / "project"
    library = project / "libs" / "helper"
    (library / "src" / "helper").mkdir(parents=True)
    (library / "src" / "helper" / "__init__.py").write_text("ANSWER = 42\n")
    (library / "pyproject.toml").write_text(
        '[project]\nname = "helper"\nversion = "0.1"\nrequires-python = ">=3.10"\n'
        '[build-system]\nrequires = ["uv_build>=0.8,<1"]\nbuild-backend = "uv_build"\n')
    make_wheel(tmp_path / "wheels", "rgsrc-alpha", "1.0")
    (project / "requirements.txt").write_text(
        f"--no-index\n--find-links {tmp_path / 'wheels'}\n-e ./libs/helper\nrgsrc-alpha==1.0\n")
    lock = read_lock(project / "requirements.txt")

    environment = LocalEnvironments(tmp_path / "envs", sources=lock.sources)(lock.pins())

    assert lock.pins() == {"rgsrc-alpha": "1.0"}
    assert env_python_value(environment.python, "helper.ANSWER", "helper") == "42"
    assert json.loads((environment.path / ENV_MARKER).read_text())["problems"] == []


@pytest.mark.parametrize(("line", "says"), [
    ("-e ../elsewhere", "an editable install of"),
    ("jinja2 @ git+https://github.com/pallets/jinja@main", "a VCS pin without a commit"),
    ("-e git+https://github.com/pallets/jinja#egg=jinja2", "a VCS pin without a commit"),
    ("-r more.txt", "-r is not supported"),
    ("rgsrc-alpha==1.0 --config-settings x=y", "--config-settings is not supported"),
])
def test_what_cannot_be_honoured_is_refused_in_one_line_naming_the_line(
        tmp_path: Path, line: str, says: str) -> None:
    project = tmp_path / "project"
    (tmp_path / "elsewhere").mkdir()
    project.mkdir()
    (project / "requirements.txt").write_text(f"markupsafe==3.0.2\n{line}\n")

    with pytest.raises(GateError) as raised:
        read_lock(project / "requirements.txt")

    assert raised.value.kind == ErrorKind.LOCKFILE
    assert f"{project / 'requirements.txt'}:2: " in raised.value.message
    assert says in raised.value.message and "\n" not in raised.value.message


def test_a_uv_lock_git_source_is_installed_at_its_commit_and_refused_without_one(
        tmp_path: Path) -> None:
    commit = "a" * 40
    text = ('version = 1\nrequires-python = ">=3.10"\n\n[[package]]\nname = "trainer"\n'
            'version = "0.1.0"\nsource = { virtual = "." }\ndependencies = [{ name = "jinja2" }]\n'
            '\n[[package]]\nname = "jinja2"\nversion = "3.1.6"\n'
            'source = { git = "https://github.com/pallets/jinja?rev=main#COMMIT" }\n')
    (tmp_path / "uv.lock").write_text(text.replace("COMMIT", commit))

    lock = read_lock(tmp_path / "uv.lock")

    origin = lock.sources.pinned[("jinja2", "3.1.6")]
    assert origin.requirement == f"jinja2 @ git+https://github.com/pallets/jinja@{commit}"

    (tmp_path / "uv.lock").write_text(text.replace("#COMMIT", ""))
    with pytest.raises(GateError) as raised:
        read_lock(tmp_path / "uv.lock")
    assert raised.value.kind == ErrorKind.LOCKFILE
    assert "package jinja2: git source https://github.com/pallets/jinja?rev=main has no commit" \
        in raised.value.message


def test_an_editable_workspace_path_outside_the_project_is_refused(tmp_path: Path) -> None:
    (tmp_path / "uv.lock").write_text(
        'version = 1\nrequires-python = ">=3.10"\n\n[[package]]\nname = "trainer"\n'
        'version = "0.1.0"\nsource = { editable = "." }\n'
        'dependencies = [{ name = "shared" }]\n\n'
        '[[package]]\nname = "shared"\nversion = "0.1.0"\nsource = { editable = "../shared" }\n')

    with pytest.raises(GateError) as raised:
        read_lock(tmp_path / "uv.lock")

    assert raised.value.kind == ErrorKind.LOCKFILE
    assert "package shared: an editable install of" in raised.value.message
    assert "outside the project" in raised.value.message


def test_credentials_in_a_lock_line_never_reach_the_refusal(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text(
        f"pkg @ git+https://user:{SECRET}@git.example/pkg@main\n")

    with pytest.raises(GateError) as raised:
        read_lock(tmp_path / "requirements.txt")

    assert SECRET not in raised.value.message
    assert "https://user:***@git.example/pkg@main" in raised.value.message


def test_the_index_options_are_the_environments_identity(
        tmp_path: Path, uv_session: None) -> None:
    """The same pins from another index are another environment."""
    for folder in ("one", "two"):
        make_wheel(tmp_path / folder, "rgsrc-alpha", "1.0", f"WHERE = {folder!r}\n")
    built = []
    for folder in ("one", "two"):
        lock_path = tmp_path / folder / "requirements.txt"
        lock_path.write_text(f"--no-index\n--find-links {tmp_path / folder}\nrgsrc-alpha==1.0\n")
        lock = read_lock(lock_path)
        built.append(LocalEnvironments(tmp_path / "envs", sources=lock.sources)(lock.pins()))

    assert built[0].path != built[1].path
    assert env_python_value(built[1].python, "rgsrc_alpha.WHERE", "rgsrc_alpha") == "two"
    assert os.environ.get("UV_OFFLINE") == "1"  # nothing here needed the network


def test_a_direct_reference_is_a_pin_installed_from_its_url_with_its_hash(
        tmp_path: Path, uv_session: None) -> None:
    wheel = make_wheel(tmp_path / "wheels", "cpubuild", "2.13.0+cpu")
    lock_path = tmp_path / "requirements.txt"
    lock_path.write_text(f"cpubuild @ {wheel.as_uri()} --hash=sha256:{sha256_of(wheel)}\n")
    lock = read_lock(lock_path)

    environment = LocalEnvironments(tmp_path / "envs", sources=lock.sources)(lock.pins())

    assert lock.pins() == {"cpubuild": "2.13.0+cpu"}
    assert env_python_value(environment.python, "cpubuild.VERSION", "cpubuild") == "2.13.0+cpu"
