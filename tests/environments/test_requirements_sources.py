"""Where a requirements file's pins come from: its index options, hashes, direct references and
editable lines, as pip reads them; what cannot be honoured is refused naming the line."""

from __future__ import annotations

from pathlib import Path

import pytest

from repro_gate.environments.package_sources import Origin
from repro_gate.environments.requirements_sources import requirements_sources
from repro_gate.errors import ErrorKind, GateError

COMMIT = "0123456789abcdef" * 2 + "01234567"
FILE = """\
# compiled by uv pip compile
--index-url https://ci:s3cret@pypi.example/simple
--extra-index-url=https://extra.example/simple
-f wheels
--pre
numpy==2.0.1 \\
    --hash=sha256:aaa \\
    --hash sha256:bbb
    # via torch
pywin32==306 ; sys_platform == "win32"
Foo.Bar[extra]==1.0
mylib @ https://files.example/mylib-1.2.3-py3-none-any.whl
-e ./pkg
-e .
-e git+https://github.com/o/r.git@{commit}#egg=Some_Pkg
"""


def sources_of(text: str, project: Path) -> dict[tuple[str, str], Origin]:
    return dict(requirements_sources(project / "requirements.txt", text, project).pinned)


def refusal(text: str, project: Path) -> str:
    with pytest.raises(GateError) as raised:
        requirements_sources(project / "requirements.txt", text, project)
    assert raised.value.kind == ErrorKind.LOCKFILE
    return raised.value.message


def test_the_files_options_apply_to_every_pin(tmp_path: Path) -> None:
    pinned = sources_of(FILE.format(commit=COMMIT), tmp_path)

    options = ("--index-url https://ci:s3cret@pypi.example/simple",
               "--extra-index-url https://extra.example/simple",
               f"--find-links {tmp_path.resolve() / 'wheels'}", "--pre")
    assert {origin.options for origin in pinned.values()} == {options}


def test_pins_keep_their_hashes_and_lose_their_markers(tmp_path: Path) -> None:
    pinned = sources_of(FILE.format(commit=COMMIT), tmp_path)

    assert pinned[("numpy", "2.0.1")].hashes == ("sha256:aaa", "sha256:bbb")
    assert pinned[("numpy", "2.0.1")].line() == (
        "numpy==2.0.1 --hash=sha256:aaa --hash=sha256:bbb")
    assert pinned[("pywin32", "306")].requirement == "pywin32==306"
    assert pinned[("foo-bar", "1.0")].requirement == "Foo.Bar[extra]==1.0"


def test_direct_references_are_pinned_at_their_version_or_commit(tmp_path: Path) -> None:
    pinned = sources_of(FILE.format(commit=COMMIT), tmp_path)
    git = f"git+https://github.com/o/r.git@{COMMIT}"

    assert pinned[("mylib", "1.2.3")].requirement == (
        "mylib @ https://files.example/mylib-1.2.3-py3-none-any.whl")
    assert pinned[("some-pkg", git)].requirement == f"some-pkg @ {git}"


def test_editable_folders_inside_the_project_are_installed_and_the_project_is_not(
    tmp_path: Path,
) -> None:
    sources = requirements_sources(tmp_path / "requirements.txt", FILE.format(commit=COMMIT),
                                   tmp_path)

    assert sources.local == (Origin((), f"-e {tmp_path.resolve() / 'pkg'}"),)
    assert sources.hash_any is True
    assert [group.require_hashes for group in sources.groups({"numpy": "2.0.1"})] == [
        True, False]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("-e ../elsewhere", "an editable install of"),
        ("-e git+https://github.com/o/r.git@main#egg=x", "is a VCS pin without a commit"),
        (f"-e git+https://github.com/o/r.git@{COMMIT}", "names no package (#egg=name)"),
        ("x @ git+https://github.com/o/r.git@v1.0", "is a VCS pin without a commit"),
        ("https://files.example/x-1.0.tar.gz", "is a direct reference without a name"),
        ("--require-virtualenv", "--require-virtualenv is not supported in a lock"),
        ("numpy==2.0.1 --config-settings x=y", "--config-settings is not supported on a"),
    ],
)
def test_what_cannot_be_honoured_is_refused_naming_the_line(tmp_path: Path, line: str,
                                                           message: str) -> None:
    found = refusal(f"# header\nrich==13.7.1\n{line}\n", tmp_path)

    assert found.startswith(f"{tmp_path / 'requirements.txt'}:3: ")
    assert message in found


def test_a_refusal_masks_the_credentials_it_quotes(tmp_path: Path) -> None:
    found = refusal("-e git+https://bot:t0ken@github.com/o/r.git@main#egg=x\n", tmp_path)

    assert "t0ken" not in found and "https://bot:***@github.com" in found
