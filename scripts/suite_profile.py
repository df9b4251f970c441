"""Where the test suite's minutes go: a JUnit XML report summed folder by folder.

    ./scripts/test --junitxml=suite.xml
    .venv/bin/python scripts/suite_profile.py suite.xml

Each test's time is its set-up, call and tear-down, as pytest writes them; with two workers the
folders add up to about twice the wall time. The table is Markdown, for docs/testing.md.
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from dataclasses import dataclass
from pathlib import PurePosixPath

ACCEPTANCE_DEPTH = 3  # tests/acceptance/<kind>
UNIT_DEPTH = 2  # tests/<package>


@dataclass
class FolderTime:
    tests: int = 0
    seconds: float = 0.0


def folder_of(classname: str) -> str:
    """The folder a test counts under, from a JUnit classname like tests.acceptance.cli.test_x."""
    parts = classname.split(".")
    module_parts = next(
        (parts[: index + 1] for index, part in enumerate(parts) if part.startswith("test_")),
        parts,
    )
    folders = module_parts[:-1]
    depth = ACCEPTANCE_DEPTH if folders[1:2] == ["acceptance"] else UNIT_DEPTH
    return str(PurePosixPath(*folders[:depth])) if folders else "tests"


def profile(report: str) -> dict[str, FolderTime]:
    folders: dict[str, FolderTime] = defaultdict(FolderTime)
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        folder = folders[folder_of(case.get("classname", ""))]
        folder.tests += 1
        folder.seconds += float(case.get("time", "0"))
    return dict(folders)


def table(folders: dict[str, FolderTime]) -> str:
    total = sum(folder.seconds for folder in folders.values())
    lines = ["| folder | tests | minutes | share |", "| --- | ---: | ---: | ---: |"]
    for name, folder in sorted(folders.items(), key=lambda item: -item[1].seconds):
        share = folder.seconds / total if total else 0.0
        lines.append(f"| `{name}` | {folder.tests} | {folder.seconds / 60:.1f} | {share:.0%} |")
    tests = sum(folder.tests for folder in folders.values())
    lines.append(f"| all | {tests} | {total / 60:.1f} | 100% |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", help="a JUnit XML report written by pytest --junitxml")
    arguments = parser.parse_args(argv)
    try:
        print(table(profile(arguments.report)))
    except (OSError, ElementTree.ParseError) as error:
        print(f"suite_profile: cannot read {arguments.report}: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
