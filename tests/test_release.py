"""The release pipeline behind `@v1`: the rewrite of action.yml for the release commit, the
release job's git script run against a local remote, and the workflows' pins and permissions.

Registries, multi-arch builds and attestation cannot run here (docs/releasing.md); what the
release does to the repository can, and is checked on its result: the tags and commits of a
real (local, bare) remote.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import pytest
import yaml
from helpers.paths import ROOT

SCRIPT = ROOT / "scripts" / "release_action_yml.py"
WORKFLOWS = ROOT / ".github" / "workflows"
IMAGE = "ghcr.io/acme/repro-gate"
DIGEST = "sha256:" + "0123456789abcdef" * 4
PINNED = f"docker://{IMAGE}@{DIGEST}"
SHA_PIN = re.compile(r"uses: (?P<action>[\w.-]+/[\w./-]+)@(?P<sha>[0-9a-f]{40}) # v\d+\.\d+\.\d+$")


def load_script() -> ModuleType:
    """scripts/release_action_yml.py, imported by path (it is not part of the package)."""
    spec = importlib.util.spec_from_file_location("release_action_yml", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


release = load_script()

ACTION_WITH_COMMENTS = (
    "# The action's metadata.\r\n"
    "name: x\r\n"
    "inputs:\r\n"
    "  image:        # an input named like the key we rewrite\r\n"
    "    description: Training image\r\n"
    "    default: Dockerfile\r\n"
    "runs:   # how it runs\r\n"
    "  # built from source on the branch\r\n"
    "  using: 'docker'\r\n"
    '  image: "Dockerfile"   # the release commit pins this\r\n'
    "  args:\r\n"
    "    - image: Dockerfile\r\n"
    "outputs: {}\r\n"
)


def test_pin_changes_only_runs_image_of_the_real_action() -> None:
    before = (ROOT / "action.yml").read_text()

    after = release.pin_image(before, IMAGE, DIGEST)

    assert len(after.splitlines()) == len(before.splitlines())
    pairs = zip(before.splitlines(), after.splitlines(), strict=True)
    assert [(a, b) for a, b in pairs if a != b] == [("  image: Dockerfile", f"  image: {PINNED}")]
    assert yaml.safe_load(after) == {
        **yaml.safe_load(before), "runs": {"using": "docker", "image": PINNED}
    }


def test_pin_keeps_comments_quotes_line_ends_and_other_image_keys() -> None:
    after = release.pin_image(ACTION_WITH_COMMENTS, IMAGE, DIGEST)

    assert after == ACTION_WITH_COMMENTS.replace(
        '  image: "Dockerfile"', f'  image: "{PINNED}"'
    )
    assert yaml.safe_load(after)["runs"]["image"] == PINNED
    assert yaml.safe_load(after)["inputs"]["image"]["default"] == "Dockerfile"


def test_pin_is_idempotent_for_the_same_digest_and_refuses_another() -> None:
    once = release.pin_image(ACTION_WITH_COMMENTS, IMAGE, DIGEST)

    assert release.pin_image(once, IMAGE, DIGEST) == once
    with pytest.raises(release.ReleaseInputError, match="not 'Dockerfile'"):
        release.pin_image(once, IMAGE, "sha256:" + "f" * 64)


@pytest.mark.parametrize(
    "digest",
    [
        "sha256:" + "0" * 63,
        "sha256:" + "0" * 65,
        "sha256:" + "A" * 64,
        "sha512:" + "0" * 64,
        "0" * 64,
        "sha256:" + "0" * 63 + "g",
        f"{DIGEST}\n",
        "",
    ],
)
def test_pin_refuses_a_digest_that_is_not_sha256_hex(digest: str) -> None:
    with pytest.raises(release.ReleaseInputError, match="not sha256:<64"):
        release.pin_image(ACTION_WITH_COMMENTS, IMAGE, digest)


@pytest.mark.parametrize(
    "image", ["ghcr.io/Acme/repro-gate", "ghcr.io/acme/repro-gate:v1", "ghcr.io", "", "a b/c"]
)
def test_pin_refuses_an_image_name_a_registry_would_not_take(image: str) -> None:
    with pytest.raises(release.ReleaseInputError, match="lower-case registry/repository"):
        release.pin_image(ACTION_WITH_COMMENTS, image, DIGEST)


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ("runs:\n  using: docker\n  image: Dockerfile.release\n", "not 'Dockerfile'"),
        ("runs:\n  using: docker\n  image: docker://ghcr.io/x/y:v1\n", "not 'Dockerfile'"),
        ("runs:\n  using: composite\n  steps: []\n", "not docker"),
        ("runs: {using: docker, image: Dockerfile}\n", "no top-level `runs:` block mapping"),
        ("name: x\n", "no top-level `runs:`"),
        ("runs:\n  using: docker\n", "has 0 `image:` entries"),
    ],
)
def test_pin_refuses_an_action_that_does_not_build_from_the_dockerfile(
    action: str, message: str
) -> None:
    with pytest.raises(release.ReleaseInputError, match=re.escape(message)):
        release.pin_image(action, IMAGE, DIGEST)


def run_script(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, check=False
    )


def test_command_pins_in_place_and_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    action = tmp_path / "action.yml"
    action.write_bytes(ACTION_WITH_COMMENTS.encode())

    bad = run_script("pin", action, IMAGE, "sha256:beef")
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr.count("\n") == 1 and "sha256:beef" in bad.stderr
    assert action.read_bytes() == ACTION_WITH_COMMENTS.encode()

    pinned = release.pin_image(ACTION_WITH_COMMENTS, IMAGE, DIGEST).encode()
    for _ in range(2):  # the second run finds it pinned already
        good = run_script("pin", action, IMAGE, DIGEST)
        assert (good.returncode, good.stderr) == (0, "")
        assert action.read_bytes() == pinned

    again = run_script("check", action)
    assert again.returncode == 2 and again.stderr.count("\n") == 1
    for args in (["notes", tmp_path / "missing.md", "v1.0.0"], ["publish"], []):
        result = run_script(*args)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, args


CHANGELOG = """\
# Changelog

## [Unreleased]

## [1.2.0] - 2026-11-23

### Added
- Release pipeline.

## [1.1.0] - 2026-10-01

- Older.

[1.2.0]: https://github.com/acme/repro-gate/compare/v1.1.0...v1.2.0
"""


def test_notes_are_the_changelog_section_of_the_version() -> None:
    assert release.release_notes(CHANGELOG, "v1.2.0") == "### Added\n- Release pipeline.\n"
    assert release.release_notes(CHANGELOG, "1.1.0") == "- Older.\n"
    for missing in ("v1.3.0", "Unreleased"):  # absent, and present but empty
        with pytest.raises(release.ReleaseInputError, match="no section"):
            release.release_notes(CHANGELOG, missing)


def test_the_project_changelog_has_an_unreleased_section() -> None:
    notes = release.release_notes((ROOT / "CHANGELOG.md").read_text(), "Unreleased")

    assert "### Added" in notes


@pytest.mark.parametrize(
    ("version", "tag"), [("1.2.3", "v1.2.3"), ("1.2.3rc1", "v1.2.3-rc.1"), ("0.1.0", "v0.1.0")]
)
def test_version_check_accepts_the_tag_of_the_package_version(version: str, tag: str) -> None:
    assert release.check_version(f'[project]\nversion = "{version}"\n', tag) == version


@pytest.mark.parametrize(
    ("pyproject", "tag", "message"),
    [
        ('[project]\nversion = "0.1.0"\n', "v1.0.0", "version is 0.1.0, the tag is v1.0.0"),
        ('[project]\nversion = "1.0.0"\n', "1.0.0", "is not vMAJOR.MINOR.PATCH"),
        ('[project]\nversion = "1.0.0"\n', "v1.0", "is not vMAJOR.MINOR.PATCH"),
        ("[project]\nname = 'x'\n", "v1.0.0", "no readable project.version"),
        ("[project\n", "v1.0.0", "no readable project.version"),
    ],
)
def test_version_check_refuses_a_tag_the_package_does_not_carry(
    pyproject: str, tag: str, message: str
) -> None:
    with pytest.raises(release.ReleaseInputError, match=re.escape(message)):
        release.check_version(pyproject, tag)


# --- The release job's git script, run as written in release.yml against a local remote ---


@dataclass
class Origin:
    """A bare repository standing in for GitHub, and the commit a version tag was pushed on."""

    bare: Path
    source: str

    def git(self, *args: str) -> str:
        return git(self.bare, *args)

    def commit_of(self, ref: str) -> str:
        return self.git("rev-parse", f"{ref}^{{commit}}")

    def tags(self) -> dict[str, str]:
        names = self.git("tag", "--list").split()
        return {name: self.commit_of(name) for name in names}


GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}


def git(where: Path, *args: str) -> str:
    result = subprocess.run(
        ["git", "-C", str(where), *args], capture_output=True, text=True, check=True,
        env={**os.environ, **GIT_ENV, "GIT_AUTHOR_NAME": "dev", "GIT_AUTHOR_EMAIL": "dev@x",
             "GIT_COMMITTER_NAME": "dev", "GIT_COMMITTER_EMAIL": "dev@x"},
    )
    return result.stdout.strip()


@pytest.fixture
def origin(tmp_path: Path) -> Origin:
    """main holds the project's action.yml, CHANGELOG.md and the release script."""
    bare, work = tmp_path / "origin.git", tmp_path / "dev"
    git(tmp_path, "init", "--quiet", "--bare", str(bare))
    git(tmp_path, "init", "--quiet", "--initial-branch=main", str(work))
    for name in ("action.yml", "CHANGELOG.md", "scripts/release_action_yml.py"):
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, work / name)
    git(work, "add", ".")
    git(work, "commit", "--quiet", "-m", "source")
    git(work, "push", "--quiet", str(bare), "main")
    return Origin(bare, git(work, "rev-parse", "HEAD"))


def release_step() -> tuple[str, dict[str, str]]:
    """The script of the release job's `tags` step and its fixed environment."""
    workflow = yaml.safe_load((WORKFLOWS / "release.yml").read_text())
    step = next(s for s in workflow["jobs"]["release"]["steps"] if s.get("id") == "tags")
    fixed = {k: v for k, v in step["env"].items() if "${{" not in str(v)}
    return step["run"], fixed


def run_release(origin: Origin, tmp_path: Path, tag: str, *, major: str, prerelease: bool,
                source: str | None = None) -> subprocess.CompletedProcess[str]:
    """The step as the runner runs it, in a checkout of `source` (actions/checkout by SHA)."""
    checkout = tmp_path / f"checkout-{tag}-{len(list(tmp_path.iterdir()))}"
    git(tmp_path, "clone", "--quiet", str(origin.bare), str(checkout))
    git(checkout, "checkout", "--quiet", "--detach", source or origin.source)
    script, fixed = release_step()
    (tmp_path / "step.sh").write_text(script)
    outputs = tmp_path / "github_output"
    outputs.write_text("")
    env = {
        **os.environ, **GIT_ENV, **fixed,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "TAG": tag, "SOURCE_SHA": source or origin.source, "IMAGE": IMAGE, "DIGEST": DIGEST,
        "MAJOR": major, "PRERELEASE": str(prerelease).lower(), "GH_TOKEN": "ghs_test",
        "GITHUB_OUTPUT": str(outputs),
    }
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(tmp_path / "step.sh")],
        cwd=checkout, env=env, capture_output=True, text=True, timeout=60, check=False,
    )


def test_one_tag_push_makes_the_release_commit_and_moves_the_tags(
    origin: Origin, tmp_path: Path
) -> None:
    origin.git("tag", "-a", "-m", "v1.2.3", "v1.2.3", origin.source)

    result = run_release(origin, tmp_path, "v1.2.3", major="1", prerelease=False)

    assert result.returncode == 0, result.stdout + result.stderr
    released = origin.commit_of("v1.2.3")
    assert released != origin.source
    assert origin.git("rev-parse", f"{released}^") == origin.source
    assert origin.git("diff", "--name-only", origin.source, released) == "action.yml"
    assert yaml.safe_load(origin.git("show", f"{released}:action.yml"))["runs"]["image"] == PINNED
    assert origin.tags() == {"v1": released, "v1.2.3": released}
    assert origin.git("cat-file", "-t", "v1.2.3") == "tag"  # annotated
    assert origin.commit_of("main") == origin.source  # the branch keeps image: Dockerfile
    assert "image: Dockerfile" in origin.git("show", "main:action.yml")
    assert f"commit={released}\n" in (tmp_path / "github_output").read_text()

    again = run_release(origin, tmp_path, "v1.2.3", major="1", prerelease=False)

    assert again.returncode != 0
    assert "no longer points at" in again.stdout
    assert origin.tags() == {"v1": released, "v1.2.3": released}


def test_an_older_hotfix_or_a_prerelease_leaves_the_major_tag_alone(
    origin: Origin, tmp_path: Path
) -> None:
    origin.git("tag", "v1.3.0", origin.source)
    origin.git("tag", "v1", origin.source)
    origin.git("tag", "v1.2.4", origin.source)  # lightweight, pushed after v1.3.0
    origin.git("tag", "v2.0.0-rc.1", origin.source)

    hotfix = run_release(origin, tmp_path, "v1.2.4", major="1", prerelease=False)
    candidate = run_release(origin, tmp_path, "v2.0.0-rc.1", major="2", prerelease=True)

    assert hotfix.returncode == 0, hotfix.stdout + hotfix.stderr
    assert candidate.returncode == 0, candidate.stdout + candidate.stderr
    tags = origin.tags()
    assert tags["v1"] == tags["v1.3.0"] == origin.source
    assert "v2" not in tags
    for version in ("v1.2.4", "v2.0.0-rc.1"):
        assert origin.git("rev-parse", f"{tags[version]}^") == origin.source


def test_a_tag_pushed_again_elsewhere_is_not_moved(origin: Origin, tmp_path: Path) -> None:
    origin.git("tag", "v1.2.3", origin.source)
    other = origin.git("commit-tree", "-p", origin.source, "-m", "other",
                       origin.git("rev-parse", f"{origin.source}^{{tree}}"))
    origin.git("tag", "--force", "v1.2.3", other)

    result = run_release(origin, tmp_path, "v1.2.3", major="1", prerelease=False)

    assert result.returncode != 0
    assert origin.tags() == {"v1.2.3": other}


# --- The workflows: pins, permissions, triggers ---


def workflow(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def test_every_third_party_action_is_pinned_by_commit_sha_with_its_version() -> None:
    pinned = set()
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for line in path.read_text().splitlines():
            uses = line.strip().removeprefix("- ")
            if not uses.startswith("uses:") or uses.startswith("uses: ./"):
                continue
            match = SHA_PIN.fullmatch(uses)
            assert match, (path.name, line)
            pinned.add(match["action"])
    assert {"actions/checkout", "docker/build-push-action",
            "actions/attest-build-provenance"} <= pinned


def test_jobs_get_only_the_permissions_they_use() -> None:
    release_jobs = workflow("release.yml")["jobs"]
    assert {name: job["permissions"] for name, job in release_jobs.items()} == {
        "prepare": {"contents": "read"},
        "image": {"contents": "read", "packages": "write", "id-token": "write",
                  "attestations": "write"},
        "package": {"contents": "read"},
        "pypi": {"id-token": "write"},
        "release": {"contents": "write"},
    }
    ci_jobs = workflow("ci.yml")["jobs"]
    assert {job["permissions"]["contents"] for job in ci_jobs.values()} == {"read"}
    assert all(len(job["permissions"]) == 1 for job in ci_jobs.values())
    for name in ("release.yml", "ci.yml"):
        document = workflow(name)
        assert document["permissions"] == {}
        for job in document["jobs"].values():
            for step in job["steps"]:
                if step.get("uses", "").startswith("actions/checkout@"):
                    assert step["with"]["persist-credentials"] is False, name


def test_a_release_is_one_version_tag_push() -> None:
    document = workflow("release.yml")

    assert document[True] == {"push": {"tags": ["v*.*.*"]}}  # YAML 1.1 reads `on` as True
    image = document["jobs"]["image"]["steps"]
    build = next(s for s in image if s.get("id") == "build")["with"]
    assert build["platforms"] == "linux/amd64,linux/arm64"
    assert (build["push"], build["provenance"], build["sbom"]) == (True, "mode=max", True)
    attest = next(s for s in image if s.get("uses", "").startswith("actions/attest-build-"))
    assert attest["with"]["subject-digest"] == "${{ steps.build.outputs.digest }}"
    assert attest["with"]["push-to-registry"] is True


def test_the_package_is_built_once_and_published_by_trusted_publishing() -> None:
    jobs = workflow("release.yml")["jobs"]
    publish = next(s for s in jobs["pypi"]["steps"]
                   if s.get("uses", "").startswith("pypa/gh-action-pypi-publish@"))

    assert "-m build --outdir dist ." in "".join(s.get("run", "") for s in jobs["package"]["steps"])
    assert jobs["pypi"]["environment"]["name"] == "pypi"
    assert "password" not in publish["with"] and publish["with"]["attestations"] is True
    assert "pypi" in jobs["release"]["needs"]
    notes = next(s for s in jobs["release"]["steps"] if s.get("name", "").startswith("GitHub"))
    assert 'pip install "repro-gate==$VERSION"' in notes["run"]


def test_the_examples_pin_the_version_the_release_publishes() -> None:
    version = release.tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    pins = {match for path in sorted((ROOT / "examples").rglob("*.yml"))
            for match in re.findall(r"repro-gate(?:\[[\w,]+\])?==([\w.]+)", path.read_text())}

    assert pins == {version}


def test_ci_runs_the_action_itself_with_inputs_it_declares() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    steps = workflow("ci.yml")["jobs"]["action"]["steps"]

    gate = next(step for step in steps if step.get("uses") == "./")

    assert set(gate["with"]) <= set(action["inputs"])
    assert gate["with"]["gpus"] == "none"
