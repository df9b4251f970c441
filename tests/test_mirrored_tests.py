"""Logic is tested where it lives: most modules have a unit test at their mirrored path.

`src/repro_gate/<package>/<module>.py` is tested by `tests/<package>/test_<module>.py` (any
depth). `__init__`, `__main__` and the injected probe (which runs in the user's process and is
tested through it) are left out. `python tests/test_mirrored_tests.py` lists the modules that
have none.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "repro_gate"
TESTS = ROOT / "tests"
LEFT_OUT = ("__init__.py", "__main__.py")
PROBE = PACKAGE / "probe" / "inject"
FLOOR = 0.5  # the share of modules that must have a mirrored unit test


def counted_modules() -> list[Path]:
    """The modules whose mirrored test is counted, relative to the package."""
    return sorted(
        path.relative_to(PACKAGE)
        for path in PACKAGE.rglob("*.py")
        if path.name not in LEFT_OUT and PROBE not in path.parents
    )


def mirrored_test(module: Path) -> Path:
    return TESTS / module.parent / f"test_{module.name}"


def untested(modules: list[Path]) -> list[Path]:
    return [module for module in modules if not mirrored_test(module).is_file()]


def test_at_least_half_of_the_modules_have_a_unit_test_at_their_mirrored_path() -> None:
    modules = counted_modules()
    missing = untested(modules)
    tested = len(modules) - len(missing)
    assert tested >= FLOOR * len(modules), (
        f"{tested} of {len(modules)} modules have a test at their mirrored path"
    )


if __name__ == "__main__":
    modules = counted_modules()
    missing = untested(modules)
    print(f"{len(modules) - len(missing)} of {len(modules)} modules have a mirrored unit test")
    for module in missing:
        print(f"  no {mirrored_test(module).relative_to(ROOT)}")
