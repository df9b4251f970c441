"""The `upgrade:` section of `.repro-gate.yml`, and the package's place in the layers."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_architecture import package_imports

from repro_gate import config, validation
from repro_gate.config import Config
from repro_gate.config.model import DEFAULT_ENV_CACHE, ToleranceConfig, UpgradeConfig
from repro_gate.errors import ConfigError


def test_the_defaults_are_defined_once(tmp_path: Path) -> None:
    loaded = config.load(None, {}, tmp_path)

    assert loaded.upgrade == UpgradeConfig()
    assert (loaded.upgrade.lock, loaded.upgrade.inherit_site_packages,
            loaded.upgrade.tolerance, loaded.upgrade.max_bisect_runs) == (None, False, None, 32)
    assert loaded.upgrade.cache_dir == DEFAULT_ENV_CACHE
    assert loaded.upgrade.cache_path == Path.home() / ".cache" / "repro-gate" / "envs"


def test_the_section_becomes_typed_and_reads_back_the_same(tmp_path: Path) -> None:
    (tmp_path / ".repro-gate.yml").write_text(
        "upgrade:\n  lock: locks/requirements.txt\n  inherit_site_packages: true\n"
        "  tolerance: {atol: 1.0e-6}\n  max_bisect_runs: 12\n  cache_dir: /var/cache/envs\n"
    )

    loaded = config.load(None, {}, tmp_path)
    document = loaded.as_document()

    assert loaded.upgrade == UpgradeConfig(
        lock="locks/requirements.txt", inherit_site_packages=True,
        tolerance=ToleranceConfig(bitwise=False, atol=1e-6), max_bisect_runs=12,
        cache_dir="/var/cache/envs")
    assert document["upgrade"]["tolerance"] == {"atol": 1e-6, "rtol": 0.0}
    assert validation.errors("config", {"upgrade": document["upgrade"]}) == []
    assert Config.from_document(document) == loaded


@pytest.mark.parametrize(("section", "message"), [
    ("upgrade: {max_bisect_runs: 0}", "upgrade.max_bisect_runs: must be an integer >= 1"),
    ("upgrade: {lock: ''}", "upgrade.lock: "),
    ("upgrade: {tolerance: exact}", "upgrade.tolerance: must be 'bitwise' or a mapping"),
    ("upgrade: {inherit: true}", "upgrade: unknown key 'inherit'"),
    ("upgrade: [uv.lock]", "upgrade: must be a mapping with optional lock,"),
])
def test_a_bad_section_is_a_one_line_config_error(tmp_path: Path, section: str,
                                                  message: str) -> None:
    (tmp_path / ".repro-gate.yml").write_text(section + "\n")

    with pytest.raises(ConfigError) as raised:
        config.load(None, {}, tmp_path)

    assert message in str(raised.value)
    assert "\n" not in str(raised.value)


def test_environments_sit_with_the_parts_and_never_import_the_layers_above() -> None:
    imports = package_imports()["environments"]

    # launch: the Docker variant builds environments in sibling containers of the image
    assert imports <= {"config", "errors", "parsing", "credentials", "fingerprint", "launch"}
    below = set().union(*(imports for name, imports in package_imports().items()
                          if name in {"config", "fingerprint", "errors", "launch"}))
    assert not below & {"environments", "upgrade"}
