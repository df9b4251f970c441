"""The culprit search against the size of the change set, on real packages and real trainings.

For n changed packages with one culprit: how many trial runs `find_culprits` took, against the
bound 2*log2(n) + 3, and its wall time; then the same search again on the same locks, where
every environment comes from the cache (builds: 0). Prints JSON.

Built from real parts: n tiny pure-Python packages in versions 1.0 and 1.1, built by `uv build`
into a --find-links directory (offline, uv's own build backend); the baseline lock pins all at
1.0, the candidate all at 1.1, and only the culprit's 1.1 changes a number (FACTOR). The culprit
sorts last, the worst case for halving (two runs at every level). Each trial builds (or reuses)
`LocalEnvironments(cache, inherit_site_packages=True)` of `apply_changes(baseline, candidate,
subset)` and runs a tiny torch training in that environment's python: a linear model that
multiplies its input by the product of the packages' FACTORs, printing the final loss's bits.
CHANGED when they differ from the baseline environment's. The search is driven directly, one
training subprocess per trial, not through the gate (no probe, no fail-fast, no manifests).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from repro_gate.environments import LocalEnvironments, Lock, read_lock
from repro_gate.environments.installer import uv_binary
from repro_gate.upgrade import Outcome, apply_changes, find_culprits

BASELINE, CANDIDATE = "1.0", "1.1"
CULPRIT = "rgb-scale"  # sorts after every rgb-pkgNN: the last one halving finds
MAX_RUNS = 100
TRAINING = """
import importlib
import sys

import torch

factor = 1.0
for name in sys.argv[1:]:
    factor *= importlib.import_module(name.replace("-", "_")).FACTOR
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for _ in range(5):
    x = torch.randn(16, 8) * factor
    loss = model(x).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
print(loss.item().hex())
"""


def module_source(name: str, version: str) -> str:
    """Only the culprit's 1.1 changes FACTOR; the others' 1.1 changes a constant nobody reads."""
    factor = "1.0000001" if name == CULPRIT and version == CANDIDATE else "1.0"
    return f'FACTOR = {factor}\nVERSION = "{version}"\n'


def build_index(names: list[str], root: Path) -> Path:
    """Wheels of every package in both versions, built by `uv build`, in one directory."""
    uv, wheels = uv_binary(), root / "index"
    if uv is None:
        raise SystemExit("uv is missing: pip install uv")
    for name in names:
        for version in (BASELINE, CANDIDATE):
            module = name.replace("-", "_")
            tree = root / "sources" / f"{name}-{version}"
            (tree / "src" / module).mkdir(parents=True)
            (tree / "src" / module / "__init__.py").write_text(module_source(name, version))
            (tree / "pyproject.toml").write_text(
                f'[project]\nname = "{name}"\nversion = "{version}"\nrequires-python = ">=3.10"\n'
                '[build-system]\nrequires = ["uv_build>=0.8,<1"]\nbuild-backend = "uv_build"\n')
            subprocess.run([str(uv), "build", "--wheel", "--quiet", "--out-dir", str(wheels),
                            str(tree)], check=True, capture_output=True, timeout=120)
    return wheels


def write_lock(path: Path, names: list[str], version: str) -> Lock:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{name}=={version}\n" for name in names))
    return read_lock(path)


@dataclass
class Trainer:
    """Runs the training in an environment of given pins; counts the environments built."""

    environments: LocalEnvironments
    script: Path
    names: list[str]
    builds: int = 0
    environment_seconds: float = 0.0  # building the environments, or finding them cached
    run_seconds: list[float] = field(default_factory=list)  # each training, alone

    def loss_bits(self, pins: dict[str, str]) -> str:
        started = time.monotonic()
        environment = self.environments(pins)
        self.environment_seconds += time.monotonic() - started
        self.builds += not environment.reused
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("REPRO_GATE_") and k != "PYTHONPATH"}
        started = time.monotonic()
        completed = subprocess.run([str(environment.python), str(self.script), *self.names],
                                   env=env, capture_output=True, text=True, check=False,
                                   timeout=300)
        self.run_seconds.append(time.monotonic() - started)
        if completed.returncode != 0:
            raise SystemExit(f"training failed in {environment.path}: {completed.stderr}")
        return completed.stdout.strip()


@dataclass(frozen=True)
class SearchFigures:
    runs: int  # trial runs the search took
    groups: list[list[str]]
    complete: bool
    builds: int  # environments built during the search (the others came from the cache)
    seconds: float
    environment_seconds: float  # of which building or finding the environments
    training_seconds: float  # of which the trainings


@dataclass(frozen=True)
class SizeFigures:
    n: int
    bound: float  # 2*log2(n) + 3
    first: SearchFigures
    again: SearchFigures  # the same search on the same locks: every environment cached
    one_training_seconds: float  # the median training of both searches: the reference
    first_over_one_training: float  # the search's cost in trainings
    again_over_first: float
    again_over_first_environments: float  # the cache: finding against building


def one_search(trainer: Trainer, baseline: Lock, candidate: Lock) -> SearchFigures:
    """The baseline's loss (the reference, as run A), then the search; timed separately."""
    reference = trainer.loss_bits(baseline.pins())
    builds_before, environment_before = trainer.builds, trainer.environment_seconds
    runs_before = len(trainer.run_seconds)

    def test(subset: tuple[str, ...]) -> Outcome:
        bits = trainer.loss_bits(apply_changes(baseline, candidate, subset))
        return Outcome.CHANGED if bits != reference else Outcome.SAME

    started = time.monotonic()
    search = find_culprits(trainer.names, test, MAX_RUNS)
    seconds = time.monotonic() - started
    runs = len(search.trials)
    return SearchFigures(runs, [list(group) for group in search.groups], search.complete,
                         trainer.builds - builds_before, round(seconds, 2),
                         round(trainer.environment_seconds - environment_before, 2),
                         round(sum(trainer.run_seconds[runs_before:]), 2))


def measure(n: int, root: Path, wheels: Path, script: Path) -> SizeFigures:
    names = [f"rgb-pkg{index:02d}" for index in range(n - 1)] + [CULPRIT]
    baseline = write_lock(root / f"locks-{n}" / "baseline.txt", names, BASELINE)
    candidate = write_lock(root / f"locks-{n}" / "candidate.txt", names, CANDIDATE)

    def trainer() -> Trainer:  # a fresh one per search: only the cache directory is shared
        environments = LocalEnvironments(root / "env-cache", inherit_site_packages=True,
                                         index_args=("--no-index", "--find-links", str(wheels)))
        return Trainer(environments, script, names)

    precondition = trainer()  # the gates' part: all moved changes the loss, none moved does not
    if precondition.loss_bits(candidate.pins()) == precondition.loss_bits(baseline.pins()):
        raise SystemExit(f"n={n}: the candidate does not change the loss")
    first_trainer, again_trainer = trainer(), trainer()
    first = one_search(first_trainer, baseline, candidate)
    again = one_search(again_trainer, baseline, candidate)
    one_run = statistics.median(first_trainer.run_seconds + again_trainer.run_seconds)
    return SizeFigures(n, round(2 * math.log2(n) + 3, 2), first, again, round(one_run, 2),
                       round(first.seconds / one_run, 2), _ratio(again.seconds, first.seconds),
                       _ratio(again.environment_seconds, first.environment_seconds))


def _ratio(part: float, whole: float) -> float:
    return round(part / whole, 3) if whole else math.nan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2,4,8,16,32", help="changed packages, comma-separated")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="upgrade-bisect-") as scratch:
        root = Path(scratch)
        # uv offline with its own cache: nothing reaches the network, nothing is shared
        os.environ.update(UV_OFFLINE="1", UV_PYTHON_DOWNLOADS="never",
                          UV_CACHE_DIR=str(root / "uv-cache"))
        os.environ.pop("VIRTUAL_ENV", None)
        script = root / "train.py"
        script.write_text(TRAINING)
        started = time.monotonic()
        names = [f"rgb-pkg{index:02d}" for index in range(max(sizes) - 1)] + [CULPRIT]
        wheels = build_index(names, root)
        index_seconds = time.monotonic() - started
        results = [measure(n, root, wheels, script) for n in sizes]
    print(json.dumps({
        "workload": "one culprit among n packages (sorts last); a 5-step torch training per "
                    "trial in a cached environment (inherit_site_packages), no gate",
        "wheels_built": 2 * len(names), "index_seconds": round(index_seconds, 1),
        "results": [asdict(result) for result in results],
        "within_bound": all(result.first.runs <= result.bound for result in results),
        "again_builds": sum(result.again.builds for result in results),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
    }, indent=1))


if __name__ == "__main__":
    sys.exit(main())
