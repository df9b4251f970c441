"""Environments built from pins by real uv (and pip), cached, reused, checked; inheritance."""

from __future__ import annotations

import importlib.metadata
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.upgrade_index import PackageIndex, env_python_value

from repro_gate.environments import LocalEnvironments, pins_sha256, read_lock
from repro_gate.environments.virtualenvs import ENV_MARKER, PINS_FILE
from repro_gate.errors import ErrorKind, GateError
from repro_gate.upgrade import UpgradeRequest, apply_changes, compute_candidate


def builder(cache: Path, index: PackageIndex, *, inherit_site_packages: bool = False,
            use_uv: bool = True) -> LocalEnvironments:
    return LocalEnvironments(cache, inherit_site_packages, index_args=index.args, use_uv=use_uv)


def test_an_environment_holds_exactly_the_locks_pins_and_is_reused(
    make_project: Callable[[str], Path], package_index: PackageIndex, env_cache: Path,
) -> None:
    lock = read_lock(make_project("uv-project") / "uv.lock")
    build = builder(env_cache, package_index)

    first = build(lock.pins())
    marker = first.path / ENV_MARKER
    built_at = marker.stat().st_mtime_ns
    second = build(lock.pins())

    assert (first.reused, second.reused) == (False, True)
    assert second == first.__class__(first.python, first.lock_sha256, first.pins, True,
                                     first.path, first.installed)
    assert marker.stat().st_mtime_ns == built_at  # nothing was rebuilt
    assert first.pins == {"harmless": "1.0", "leaf": "1.0", "numlib": "1.0"}
    assert first.lock_sha256 == pins_sha256(lock.pins())
    assert first.installed == ("harmless", "leaf", "numlib")  # winonly: not for this platform
    assert env_python_value(first.python, "numlib.SCALE", "numlib") == "0.5"
    listed = env_python_value(first.python, "sorted(d.metadata['Name'] for d in"
                              " importlib.metadata.distributions())", "importlib.metadata")
    assert listed == "['harmless', 'leaf', 'numlib']"  # isolated: nothing else is there
    assert json.loads(marker.read_text())["problems"] == []


def test_other_pins_get_another_environment_and_the_candidate_its_versions(
    make_project: Callable[[str], Path], package_index: PackageIndex, env_cache: Path,
    tmp_path: Path,
) -> None:
    baseline = read_lock(make_project("uv-project") / "uv.lock")
    candidate = compute_candidate(baseline, UpgradeRequest(), tmp_path / "scratch",
                                  index_args=package_index.args)
    build = builder(env_cache, package_index)

    old, new = build(baseline.pins()), build(candidate.pins())

    assert old.path != new.path and not new.reused
    assert env_python_value(new.python, "numlib.SCALE", "numlib") == "0.5000001"
    assert (new.path / PINS_FILE).read_text() == (  # each from where the lock says
        f"--no-index\n--find-links {package_index.path}\nharmless==1.1\nleaf==1.1\nnumlib==1.1\n")


def test_an_inconsistent_mixture_is_unresolvable_and_remembered(
    make_project: Callable[[str], Path], package_index: PackageIndex, env_cache: Path,
    tmp_path: Path,
) -> None:
    baseline = read_lock(make_project("uv-project") / "uv.lock")
    candidate = compute_candidate(baseline, UpgradeRequest(), tmp_path / "scratch",
                                  index_args=package_index.args)
    mixture = apply_changes(baseline, candidate, ["harmless"])  # harmless 1.1 needs leaf>=1.1
    build = builder(env_cache, package_index)

    with pytest.raises(GateError) as raised:
        build(mixture)
    [built] = [path for path in env_cache.iterdir() if path.is_dir()]
    recorded_at = (built / ENV_MARKER).stat().st_mtime_ns
    with pytest.raises(GateError) as again:
        build(mixture)

    assert raised.value.kind is ErrorKind.LOCK_UNRESOLVABLE
    assert str(raised.value) == ("the pins do not resolve: The package `harmless` requires"
                                 " `leaf>=1.1`, but `1.0` is installed")
    assert str(again.value) == str(raised.value)
    assert (built / ENV_MARKER).stat().st_mtime_ns == recorded_at  # answered from the cache
    assert build(apply_changes(baseline, candidate, ["harmless", "leaf"])).pins["leaf"] == "1.1"


def test_a_half_built_environment_is_never_reused(
    make_project: Callable[[str], Path], package_index: PackageIndex, env_cache: Path,
) -> None:
    lock = read_lock(make_project("uv-project") / "uv.lock")
    build = builder(env_cache, package_index)
    first = build(lock.pins())
    (first.path / ENV_MARKER).unlink()  # as if the build had been killed before its end
    (first.path / "leftover").write_text("from the interrupted build")

    again = build(lock.pins())

    assert not again.reused and again.path == first.path
    assert not (again.path / "leftover").exists()
    assert env_python_value(again.python, "numlib.SCALE", "numlib") == "0.5"


def test_a_pin_that_cannot_be_installed_is_an_environment_error(
    package_index: PackageIndex, env_cache: Path,
) -> None:
    build = builder(env_cache, package_index)

    with pytest.raises(GateError) as raised:
        build({"numlib": "9.9"})

    assert raised.value.kind is ErrorKind.ENVIRONMENT
    assert str(raised.value).startswith("cannot install the pins into ")
    assert str(raised.value).endswith("Because there is no version of numlib==9.9 and you"
                                      " require numlib==9.9, we can conclude that your"
                                      " requirements are unsatisfiable.")
    [half_built] = [path for path in env_cache.iterdir() if path.is_dir()]
    assert not (half_built / ENV_MARKER).exists()


def test_inherit_site_packages_installs_only_what_the_interpreter_does_not_have(
    package_index: PackageIndex, env_cache: Path,
) -> None:
    pyyaml = importlib.metadata.version("pyyaml")
    torch = importlib.metadata.version("torch")  # e.g. 2.13.0+cpu
    public_torch = torch.split("+")[0]
    build = builder(env_cache, package_index, inherit_site_packages=True)

    # Neither would install: the index has no pyyaml and no torch. Both are met as inherited.
    environment = build({"pyyaml": pyyaml, "torch": public_torch, "numlib": "1.1"})

    assert environment.installed == ("numlib",)
    assert (environment.path / PINS_FILE).read_text().splitlines()[-1] == "numlib==1.1"
    seen = env_python_value(environment.python, "importlib.metadata.version('torch'),"
                            " yaml.__file__, numlib.__file__",
                            "importlib.metadata", "yaml", "numlib")
    version, yaml_file, numlib_file = seen.split()
    assert version == torch  # the running interpreter's, local label and all
    assert str(environment.path) not in yaml_file
    assert sys.prefix in yaml_file  # the gate's own environment, layered under
    assert numlib_file.startswith(str(environment.path))
    assert build({"pyyaml": pyyaml, "torch": public_torch, "numlib": "1.1"}).reused


def test_inherited_layers_are_checked_for_the_pins_only(
    package_index: PackageIndex, env_cache: Path,
) -> None:
    build = builder(env_cache, package_index, inherit_site_packages=True)
    pyyaml = importlib.metadata.version("pyyaml")

    with pytest.raises(GateError) as raised:
        build({"harmless": "1.1", "leaf": "1.0", "pyyaml": pyyaml})

    assert raised.value.kind is ErrorKind.LOCK_UNRESOLVABLE
    assert str(raised.value) == ("the pins do not resolve: harmless 1.1 requires leaf>=1.1,"
                                 " but leaf 1.0 is installed")


@pytest.mark.slow  # python -m venv bootstraps pip into each environment: seconds each
def test_pip_builds_the_same_environment_when_uv_is_not_used(
    make_project: Callable[[str], Path], package_index: PackageIndex, env_cache: Path,
) -> None:
    lock = read_lock(make_project("requirements-in") / "requirements.txt")
    build = builder(env_cache, package_index, use_uv=False)

    environment = build(lock.pins())

    assert json.loads((environment.path / ENV_MARKER).read_text())["tool"] == "pip"
    assert env_python_value(environment.python, "numlib.SCALE", "numlib") == "0.5"
    with pytest.raises(GateError) as raised:
        build({"harmless": "1.1", "leaf": "1.0", "numlib": "1.0"})
    assert raised.value.kind is ErrorKind.LOCK_UNRESOLVABLE
    assert str(raised.value) == ("the pins do not resolve: harmless 1.1 has requirement"
                                 " leaf>=1.1, but you have leaf 1.0.")
