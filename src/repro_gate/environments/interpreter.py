"""What a Python interpreter sees, read by running it, and whether pins are met there.

Used for `inherit_site_packages`: which locked packages the running interpreter already has at
a satisfying version (not reinstalled), where its packages live (layered under the new
environment), and whether the layered environment is consistent. `uv pip check` cannot answer
the last one there: it reads the environment's own site-packages only, so every inherited
package would look missing; and `pip check` reads everything, so the inherited image's own
conflicts (common in vendor images) would fail every mixture. This checks exactly the pinned
packages' requirements against everything the interpreter can import.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, Specifier
from packaging.version import InvalidVersion

from repro_gate.environments.installer import failure_line, run_tool
from repro_gate.environments.uv_graph import holds
from repro_gate.errors import ErrorKind, GateError, one_line
from repro_gate.fingerprint.lockfiles import canonical_name

# Runs in the inspected interpreter: stdlib only. The first distribution of a name on sys.path
# is the one `import` finds; the marker values are those of packaging's default_environment().
FACTS_SCRIPT = r"""
import importlib.metadata as metadata, json, os, platform, re, site, sys
def full(info):
    kind = info.releaselevel
    level = "" if kind == "final" else kind[0] + str(info.serial)
    return f"{info.major}.{info.minor}.{info.micro}{level}"
dists = {}
for dist in metadata.distributions():
    name = dist.metadata["Name"]
    if name:
        key = re.sub(r"[-_.]+", "-", name).lower()
        dists.setdefault(key, [dist.version, list(dist.requires or [])])
markers = {
    "implementation_name": sys.implementation.name,
    "implementation_version": full(sys.implementation.version),
    "os_name": os.name, "platform_machine": platform.machine(),
    "platform_release": platform.release(), "platform_system": platform.system(),
    "platform_version": platform.version(), "python_full_version": platform.python_version(),
    "platform_python_implementation": platform.python_implementation(),
    "python_version": ".".join(platform.python_version_tuple()[:2]), "sys_platform": sys.platform,
}
print(json.dumps({"executable": sys.executable, "version": sys.version, "markers": markers,
                  "site": site.getsitepackages(), "distributions": dists}))
"""


@dataclass(frozen=True)
class Distribution:
    """An installed distribution as the interpreter sees it."""

    version: str
    requires: tuple[str, ...]  # its Requires-Dist lines


@dataclass(frozen=True)
class Interpreter:
    """What one interpreter sees."""

    executable: str
    version: str  # sys.version
    site_dirs: tuple[str, ...]  # site.getsitepackages()
    markers: dict[str, str]  # environment marker values
    distributions: dict[str, Distribution]  # by normalized name, the one `import` finds


def inspect(python: Path) -> Interpreter:
    """Run `python` once and read what it sees; an ENVIRONMENT GateError when it cannot run."""
    try:
        completed = run_tool([python, "-c", FACTS_SCRIPT], cwd=python.parent)
    except OSError as error:
        raise GateError(f"cannot run {python}: {one_line(error)}",
                        kind=ErrorKind.ENVIRONMENT) from None
    if completed.returncode != 0:
        raise GateError(f"cannot inspect {python}: {failure_line(completed)}",
                        kind=ErrorKind.ENVIRONMENT)
    facts = json.loads(completed.stdout.strip().splitlines()[-1])
    distributions = {name: Distribution(version, tuple(requires))
                     for name, (version, requires) in facts["distributions"].items()}
    return Interpreter(facts["executable"], facts["version"], tuple(facts["site"]),
                       facts["markers"], distributions)


def satisfies(installed: str, pinned: str) -> bool:
    """Whether an installed version meets a pin by PEP 440: `2.13.0+cpu` meets `2.13.0` (a pin
    without a local label ignores the installed one's), not `2.13.0+cu126`."""
    try:
        return Specifier(f"=={pinned}").contains(installed, prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return installed == pinned


def already_met(interpreter: Interpreter, pins: Mapping[str, str]) -> dict[str, str]:
    """The pins `interpreter` already meets (inherit_site_packages): name -> its version."""
    seen = interpreter.distributions
    return {name: seen[name].version for name, version in pins.items()
            if name in seen and satisfies(seen[name].version, version)}


def unmet(interpreter: Interpreter, pins: Mapping[str, str]) -> list[str]:
    """Why the pinned packages, as `interpreter` sees them, are not a consistent set: one line
    per pin that is missing or shadowed, and per unmet requirement of a pinned package."""
    problems = []
    seen = interpreter.distributions
    environment = {**interpreter.markers, "extra": ""}
    for name, pinned in sorted(pins.items()):
        dist = seen.get(name)
        # A direct reference (`name @ URL`) pins an artifact, not a version: installed is met.
        if dist is None or not ("://" in pinned or satisfies(dist.version, pinned)):
            found = f"{dist.version} is found" if dist else "it is not installed"
            problems.append(f"{name}=={pinned} is pinned, but {found}")
            continue
        for line in dist.requires:
            try:
                requirement = Requirement(line)
            except InvalidRequirement:
                continue  # not ours to judge: the installer accepted it
            marker = str(requirement.marker) if requirement.marker else None
            if not holds(marker, environment):
                continue
            target = seen.get(canonical_name(requirement.name))
            if target is None:
                problems.append(f"{name} {dist.version} requires {requirement},"
                                " which is not installed")
            elif not requirement.specifier.contains(target.version, prereleases=True):
                found = f"{canonical_name(requirement.name)} {target.version}"
                problems.append(f"{name} {dist.version} requires {requirement},"
                                f" but {found} is installed")
    return problems
