"""What a run's working copy costs when the tree holds a big virtualenv and data it never reads.

Two git repositories, each running the embedded reference training (no `.repro-gate.yml`, no
command: what `repro-gate check` runs out of the box, 80 steps): one clean, one that also holds
an ignored `.venv` (a `pyvenv.cfg` and, by default, about 600 MB in 15,000 files) and an ignored
`data/` (about 400 MB) that the training never reads. Each round runs, on the clean tree then on
the big one: the full `repro-gate check` and `check --no-cost` in local mode (each run's working
copy an overlay of the tree inside its own namespaces), and `check --no-cost` with the fallback
copy (REPRO_GATE_NAMESPACES=off: virtualenvs linked, everything else copied); then the bare
training three times, each followed by `sha256sum` of its `model.pt`. Medians over the rounds:

- gate(big) / gate(clean), local mode: target <= 1.15 (the full check and `--no-cost`); the
  same with the fallback is reported, with no target;
- `check --no-cost` / (two bare runs + their sha256sum): target <= 1.25;
- full `check` / (three bare runs + their sha256sum): target <= 1.3;
- the output folder's size after the full check on the big tree: target <= 50 MB.

Prints JSON, with the load average before and after. With a 1-minute load above half the CPUs
at either end, `loaded` is true and the figures are not a result: other work shared the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REFERENCE_DIR = ROOT / "src" / "repro_gate" / "reference"
STEPS = 80  # ReferenceConfig.steps: runs A and B of `check` with no config
OUTPUT = "repro-gate-out"


def git_repo(path: Path) -> None:
    """A committed repository: a README and a .gitignore naming `.venv/` and `data/`."""
    path.mkdir(parents=True)
    (path / "README.md").write_text("The embedded reference training, gated.\n")
    (path / ".gitignore").write_text(".venv/\ndata/\n")
    for argv in (["init", "-q"], ["add", "."], ["-c", "user.name=bench", "-c",
                                                "user.email=bench@example.invalid",
                                                "commit", "-q", "-m", "init"]):
        subprocess.run(["git", *argv], cwd=path, check=True)


def fill(folder: Path, total_mb: float, files: int) -> None:
    """`files` files of random bytes, `total_mb` in all, 100 to a sub-folder."""
    size = max(1, int(total_mb * 1024 * 1024 / files))
    block = os.urandom(size)
    for index in range(files):
        sub = folder / f"d{index // 100:04d}"
        sub.mkdir(parents=True, exist_ok=True)
        # Distinct contents, cheaply: the index up front.
        (sub / f"f{index:06d}.bin").write_bytes(index.to_bytes(8, "little") + block[8:])


def tree_size(path: Path) -> int:
    """Bytes of the regular files under `path`, links not followed."""
    total = 0
    for folder, _, names in os.walk(path):
        for name in names:
            info = os.lstat(os.path.join(folder, name))
            total += info.st_size if not os.path.islink(os.path.join(folder, name)) else 0
    return total


def gate(repo: Path, environ: dict[str, str], extra: list[str]) -> float:
    """One `repro-gate check` in `repo`, its output folder removed first; its wall time."""
    shutil.rmtree(repo / OUTPUT, ignore_errors=True)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "repro_gate", "check", "--quiet", "--no-report",
                           *extra], cwd=repo, env=environ, capture_output=True, text=True,
                          check=False)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"gate failed ({done.returncode}) in {repo} {extra}:\n"
                         f"{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return seconds


def bare(scratch: Path, environ: dict[str, str], steps: int) -> float:
    """The reference training alone, as the gate's command line runs it, then sha256sum."""
    out = scratch / "bare"
    shutil.rmtree(out, ignore_errors=True)
    env = {**environ, "PYTHONPATH": str(REFERENCE_DIR)}
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "repro_gate_reference", "--steps", str(steps),
                    "--batch-size", "32", "--width", "32", "--device", "auto", "--out", str(out)],
                   cwd=scratch, env=env, check=True, capture_output=True)
    subprocess.run(["sha256sum", str(out / "model.pt")], check=True, capture_output=True)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--venv-mb", type=float, default=600)
    parser.add_argument("--venv-files", type=int, default=15000)
    parser.add_argument("--data-mb", type=float, default=400)
    parser.add_argument("--data-files", type=int, default=40)
    parser.add_argument("--steps", type=int, default=STEPS,
                        help="training steps of runs A and B and of the bare runs (default 80)")
    parser.add_argument("--scratch", type=Path, default=None, help="default: a temporary folder")
    args = parser.parse_args()
    steps_flag = [] if args.steps == STEPS else ["--steps", str(args.steps)]
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("GITHUB_", "INPUT_", "VIRTUAL_ENV", "REPRO_GATE_"))}
    environ["PYTHONPATH"] = str(ROOT / "src")
    fallback = {**environ, "REPRO_GATE_NAMESPACES": "off"}
    with tempfile.TemporaryDirectory(prefix="workcopy-cost-", dir=args.scratch) as name:
        scratch = Path(name)
        clean, big = scratch / "clean", scratch / "big"
        git_repo(clean)
        git_repo(big)
        started = time.monotonic()
        (big / ".venv").mkdir()
        (big / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages"
                                                  " = false\nversion = 3.11.0\n")
        fill(big / ".venv" / "lib", args.venv_mb, args.venv_files)
        fill(big / "data", args.data_mb, args.data_files)
        build_seconds = time.monotonic() - started
        if subprocess.run(["git", "status", "--porcelain"], cwd=big, capture_output=True,
                          text=True, check=True).stdout:
            raise SystemExit("the big tree is not clean: .venv/ and data/ should be ignored")
        samples: dict[str, list[float]] = {}
        sizes: dict[str, int] = {}
        load_before = os.getloadavg()
        for _ in range(args.rounds):
            for label, repo in (("clean", clean), ("big", big)):
                samples.setdefault(f"check_{label}", []).append(gate(repo, environ, steps_flag))
                sizes[label] = tree_size(repo / OUTPUT)
                samples.setdefault(f"no_cost_{label}", []).append(
                    gate(repo, environ, ["--no-cost", *steps_flag]))
                samples.setdefault(f"fallback_no_cost_{label}", []).append(
                    gate(repo, fallback, ["--no-cost", *steps_flag]))
                sizes[f"fallback_{label}"] = tree_size(repo / OUTPUT)
            runs = [bare(scratch, environ, args.steps) for _ in range(3)]
            samples.setdefault("bare_two", []).append(sum(runs[:2]))
            samples.setdefault("bare_three", []).append(sum(runs))
        load_after = os.getloadavg()

    median = {key: statistics.median(values) for key, values in samples.items()}

    def ratio(top: str, bottom: str) -> float:
        return round(median[top] / median[bottom], 3)

    cpus = os.cpu_count() or 1
    loaded = max(load_before[0], load_after[0]) > cpus / 2
    print(json.dumps({
        "workload": f"embedded reference training, {args.steps} steps",
        "rounds": args.rounds,
        "venv": {"mb": args.venv_mb, "files": args.venv_files},
        "data": {"mb": args.data_mb, "files": args.data_files},
        "build_seconds": round(build_seconds, 1),
        "seconds_median": {key: round(value, 2) for key, value in median.items()},
        "seconds_samples": {key: [round(v, 2) for v in values] for key, values in samples.items()},
        "big_over_clean": {"check": ratio("check_big", "check_clean"),
                           "no_cost": ratio("no_cost_big", "no_cost_clean"),
                           "fallback_no_cost": ratio("fallback_no_cost_big",
                                                     "fallback_no_cost_clean"),
                           "target": 1.15},
        "no_cost_over_two_bare": {"clean": ratio("no_cost_clean", "bare_two"),
                                  "big": ratio("no_cost_big", "bare_two"), "target": 1.25},
        "check_over_three_bare": {"clean": ratio("check_clean", "bare_three"),
                                  "big": ratio("check_big", "bare_three"), "target": 1.3},
        "output_mb": {key: round(value / 1e6, 2) for key, value in sizes.items()},
        "output_mb_target": 50,
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in load_after],
        "cpus": cpus,
        "loaded": loaded,
        "result": ("not a result: measured under load" if loaded
                   else "measured on a quiet machine"),
    }, indent=2))


if __name__ == "__main__":
    main()
