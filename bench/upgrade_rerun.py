"""The same `repro-gate upgrade` check twice: the second finds both environments and both gate
results in the cache and should take a fraction of the first (target: second / first <= 0.2).

Built from the test suite's parts (tests/helpers/upgrade_index.py): a local --find-links index
of tiny pure-Python packages built by `uv build`, the `uv-project` locked against it at 1.0, and
the acceptance tests' tiny torch training. Each check is the real CLI in a subprocess
(`python -m repro_gate upgrade --upgrade-package harmless --no-cost --inherit-site-packages`),
uv offline, a fresh environment cache and uv cache per invocation of this script. Prints JSON:
both wall times, their ratio, the verdicts, whether the second reused both gates, and the load
average before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from helpers.upgrade_index import (  # noqa: E402  (the suite's index and locked projects)
    BASELINE_VERSION,
    PACKAGES,
    PackageIndex,
    build_wheel,
    lock_templates,
)

TRAINING = """\
import torch
import harmless
import numlib
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
inputs = torch.randn(16, 4) * numlib.SCALE
targets = torch.randn(16, 1)
for _ in range(6):
    optimizer.zero_grad()
    loss = ((model(harmless.identity(inputs)) - targets) ** 2).mean()
    loss.backward()
    optimizer.step()
torch.save(model.state_dict(), "model.pt")
"""


def build_project(root: Path, uv_env: dict[str, str]) -> tuple[Path, PackageIndex]:
    """The index (1.0 wheels, then the 1.1 ones published) and the locked `uv-project`."""
    index = PackageIndex(root / "index")
    index.path.mkdir(parents=True)
    later = root / "published-later"
    os.environ.update(uv_env)  # uv build and uv lock below run offline, in the bench's cache
    for name, versions in PACKAGES.items():
        for version in versions:
            target = index.path if version == BASELINE_VERSION else later
            build_wheel(name, version, root / "sources", target)
    templates = root / "templates"
    templates.mkdir()
    lock_templates(templates, index)
    for wheel in later.iterdir():
        shutil.copy(wheel, index.path / wheel.name)
    project = root / "project"
    shutil.copytree(templates / "uv-project", project)
    (project / "train.py").write_text(TRAINING)
    return project, index


def check(project: Path, env_cache: Path, environ: dict[str, str]) -> tuple[float, dict, str]:
    """One upgrade check: its wall time, upgrade.json, stderr."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "repro_gate", "upgrade", "--quiet", "--no-cost",
         "--inherit-site-packages", "--env-cache", str(env_cache), "--upgrade-package",
         "harmless", "--", "python", "train.py"],
        cwd=project, env=environ, capture_output=True, text=True, check=False, timeout=900)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"the check failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    document = json.loads((project / "repro-gate-out" / "upgrade.json").read_text())
    return seconds, document, done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="upgrade-rerun-") as scratch:
        root = Path(scratch)
        uv_env = {"UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never",
                  "UV_CACHE_DIR": str(root / "uv-cache")}
        project, index = build_project(root, uv_env)
        environ = {k: v for k, v in os.environ.items()
                   if not k.startswith(("GITHUB_", "INPUT_", "VIRTUAL_ENV"))}
        environ.update({**uv_env, "UV_NO_INDEX": "1", "UV_FIND_LINKS": str(index.path),
                        "PYTHONPATH": str(ROOT / "src")})
        load_before = os.getloadavg()
        first, _, _ = check(project, root / "envs", environ)
        second, document, stderr = check(project, root / "envs", environ)
        load_after = os.getloadavg()
    reproducibility = document["reproducibility"]
    print(json.dumps({
        "first_seconds": round(first, 2),
        "second_seconds": round(second, 2),
        "ratio": round(second / first, 3),
        "target_ratio": 0.2,
        "verdict": document["verdict"],
        "second_reused_gates": [role for role in ("baseline", "candidate")
                                if reproducibility[role]["reused"]],
        "second_reused_environments": [
            role for role in ("baseline", "candidate")
            if document[role]["environment"]["reused"]],
        "reuse_lines": [line for line in stderr.splitlines() if "reused its result" in line],
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in load_after],
        "cpus": os.cpu_count(),
    }, indent=2))


if __name__ == "__main__":
    main()
