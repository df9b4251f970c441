"""`repro-gate upgrade` installs from where the project's lock and configuration say, as a new
user runs it: nothing set by hand (no `UV_FIND_LINKS`, no `UV_INDEX_URL`), real uv, a real tiny
torch training (torch inherited, never downloaded)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.local_indexes import SimpleIndex, make_wheel, serving

from repro_gate.manifest.upgrade_document import read_upgrade

SECRET = "s3cret-token-9"
TRAIN = """\
import torch
import rgsrc_alpha
{more}
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
inputs, targets = torch.randn(16, 4) * rgsrc_alpha.VALUE, torch.randn(16, 1)
for _ in range(4):
    optimizer.zero_grad()
    loss = ((model(inputs) - targets) ** 2).mean()
    loss.backward()
    optimizer.step()
torch.save(model.state_dict(), "model.pt")
"""


def upgrade(project: Path, env_cache: Path, *, offline: bool) -> subprocess.CompletedProcess[str]:
    """`repro-gate upgrade --upgrade` with uv configured by nothing but the project."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "INPUT_", "UV_INDEX", "UV_FIND_LINKS",
                                "UV_NO_INDEX", "UV_EXTRA_INDEX_URL", "UV_DEFAULT_INDEX"))}
    if not offline:
        env.pop("UV_OFFLINE", None)
    return subprocess.run(
        [sys.executable, "-m", "repro_gate", "upgrade", "--upgrade", "--no-cost",
         "--inherit-site-packages", "--env-cache", str(env_cache), "--", "python", "train.py"],
        cwd=project, env=env, capture_output=True, text=True, timeout=420, check=False)


def lock(project: Path) -> None:
    from helpers.upgrade_index import uv

    completed = subprocess.run([uv(), "lock"], cwd=project, capture_output=True, text=True,
                               check=False, timeout=120)
    assert completed.returncode == 0, completed.stderr


def changes(project: Path) -> list[tuple[str, str, str]]:
    document = read_upgrade(project / "repro-gate-out" / "upgrade.json")
    return [(change["name"], change["old"], change["new"]) for change in document["changes"]]


@pytest.mark.parametrize("find_links", ["wheels", "../wheels"])  # in the project, beside it
def test_a_uv_project_gets_its_find_links_local_version_with_nothing_set_by_hand(
        tmp_path: Path, uv_session: None, find_links: str) -> None:
    project = tmp_path / "project"
    project.mkdir()
    wheels = (project / find_links).resolve()
    make_wheel(wheels, "cpubuild", "2.13.0+cpu")
    make_wheel(wheels, "rgsrc-alpha", "1.0", "VALUE = 1.0\n")
    (project / "pyproject.toml").write_text(
        '[project]\nname = "trainer"\nversion = "0.1.0"\nrequires-python = ">=3.10"\n'
        'dependencies = ["cpubuild==2.13.0+cpu", "rgsrc-alpha>=1.0"]\n\n'
        f'[tool.uv]\nfind-links = ["{find_links}"]\nno-index = true\n')
    lock(project)
    make_wheel(wheels, "rgsrc-alpha", "1.1", "VALUE = 1.0\n")  # published later
    (project / "train.py").write_text(TRAIN.format(
        more="import cpubuild\nassert cpubuild.VERSION == '2.13.0+cpu'"))

    done = upgrade(project, tmp_path / "envs", offline=True)

    assert done.returncode == 0, done.stdout + done.stderr
    assert changes(project) == [("rgsrc-alpha", "1.0", "1.1")]
    assert "no version of cpubuild" not in done.stdout + done.stderr


@pytest.fixture
def private_index(tmp_path: Path, uv_session: None) -> Iterator[SimpleIndex]:
    wheels = tmp_path / "served"
    make_wheel(wheels, "rgsrc-alpha", "1.0", "VALUE = 1.0\n")
    make_wheel(wheels, "rgsrc-alpha", "1.1", "VALUE = 1.0\n")
    with serving(SimpleIndex(wheels, credentials=("reader", SECRET))) as index:
        yield index


def test_a_requirements_index_url_is_where_both_environments_come_from_password_masked(
        tmp_path: Path, private_index: SimpleIndex) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "requirements.txt").write_text(
        f"--index-url {private_index.url()}\nrgsrc-alpha==1.0\n")
    (project / "train.py").write_text(TRAIN.format(more=""))

    done = upgrade(project, tmp_path / "envs", offline=False)

    assert done.returncode == 0, done.stdout + done.stderr
    assert changes(project) == [("rgsrc-alpha", "1.0", "1.1")]
    downloaded = {path for path in private_index.requests if path.startswith("/files/")}
    assert downloaded == {"/files/rgsrc_alpha-1.0-py3-none-any.whl",
                          "/files/rgsrc_alpha-1.1-py3-none-any.whl"}
    assert SECRET not in done.stdout + done.stderr
    for written in [*(project / "repro-gate-out").rglob("*"), *(tmp_path / "envs").rglob("*")]:
        if written.is_file() and written.suffix in (".json", ".txt", ".md", ".log", ""):
            assert SECRET not in written.read_text(errors="replace"), written


@pytest.mark.parametrize(("line", "says"), [
    ("-e ../shared", "an editable install of"),
    ("-e git+https://github.com/pallets/jinja#egg=jinja2", "a VCS pin without a commit"),
])
def test_a_line_the_check_cannot_honour_is_a_one_line_lockfile_error(
        tmp_path: Path, uv_session: None, line: str, says: str) -> None:
    project = tmp_path / "project"
    (tmp_path / "shared").mkdir()
    project.mkdir()
    (project / "requirements.txt").write_text(f"markupsafe==3.0.2\n{line}\n")
    (project / "train.py").write_text(TRAIN.format(more=""))

    done = upgrade(project, tmp_path / "envs", offline=True)

    assert done.returncode == 2, done.stdout + done.stderr
    document = read_upgrade(project / "repro-gate-out" / "upgrade.json")
    assert document["reasons"][0]["code"] == "lockfile"
    message = document["reasons"][0]["message"]
    assert f"{project / 'requirements.txt'}:2: " in message and says in message
    assert "Traceback" not in done.stderr
