"""The probe watches the training's seeding without changing it: real training processes under
the probe, their fingerprint.json read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from repro_gate.probe import ENV_USER_ENV, FINGERPRINT_FILE, INJECT_DIR, read_json

# A library that seeds for the user, the way Lightning's seed_everything does, installed where
# libraries live (a site-packages folder): the call site recorded is the user's call of it.
LIBRARY = '''
import random

import numpy
import torch


def seed_everything(seed):
    random.seed(seed)
    numpy.random.seed(seed)
    torch.manual_seed(seed)
    torch.cuda.manual_seed_all(seed)
    return seed
'''

TRAINING = '''
import json
import os
import sys

import numpy
import torch
from seedlib import seed_everything

hooked = []
torch.nn.modules.module.register_module_parameter_registration_hook(
    lambda module, name, param: hooked.append(name))
early = torch.nn.Linear(2, 2)                                    # line 12: before any seeding
returned = {
    "seed_everything": seed_everything(7),                       # line 14
    "manual_seed": type(torch.manual_seed(7)).__name__,          # line 15
    "default_rng": type(numpy.random.default_rng(3)).__name__,   # line 16
    "unseeded_rng": type(numpy.random.default_rng()).__name__,   # line 17: seeds nothing
}
torch.backends.cudnn.benchmark = False                           # line 19
generator = torch.Generator()
generator.manual_seed(5)
loader = torch.utils.data.DataLoader(list(range(8)), generator=generator, shuffle=True)
model = torch.nn.Linear(2, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.ones(1, 2)).sum().backward()
optimizer.step()
returned["hooked"] = hooked
returned["draw"] = torch.rand(1).item()
json.dump(returned, sys.stdout)
'''


def run(tmp_path: Path, mode: str, **extra_env: str) -> tuple[dict, dict]:
    library = tmp_path / "lib" / "site-packages"
    library.mkdir(parents=True)
    (library / "seedlib.py").write_text(LIBRARY, encoding="utf-8")
    (tmp_path / "train.py").write_text(TRAINING.lstrip("\n"), encoding="utf-8")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPRO_GATE_")}
    env.update(PYTHONPATH=os.pathsep.join([str(INJECT_DIR), str(library)]),
               REPRO_GATE_RUN_DIR=str(run_dir), REPRO_GATE_MODE=mode, **extra_env)
    done = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    fingerprint = read_json(run_dir, FINGERPRINT_FILE)
    return json.loads(done.stdout), fingerprint["random"]["seeding"]


def test_the_trainings_own_seeding_is_recorded_and_behaves_as_without_the_probe(
    tmp_path: Path,
) -> None:
    printed, seeding = run(tmp_path, "default")
    plain = subprocess.run(
        [sys.executable, "train.py"], cwd=tmp_path, capture_output=True, text=True, timeout=180,
        env={**{k: v for k, v in os.environ.items() if not k.startswith("REPRO_GATE_")},
             "PYTHONPATH": str(tmp_path / "lib" / "site-packages")})
    assert json.loads(plain.stdout) == printed  # same return values, same draws, same hooks
    assert printed["hooked"] == ["weight", "bias", "weight", "bias"]  # the user's hook still runs
    assert seeding["gate_seed"] is None
    calls = {(c["call"], c["line"]): c for c in seeding["calls"]}
    # Called through the library: the user's line that called it.
    for call in ("random.seed", "numpy.random.seed", "torch.manual_seed",
                 "torch.cuda.manual_seed_all"):
        assert calls[(call, 14)]["file"] == "train.py"
        assert calls[(call, 14)]["seed"] == 7
        assert calls[(call, 14)]["before_parameters"] is False
    assert calls[("torch.manual_seed", 15)]["count"] == 1
    assert calls[("numpy.random.default_rng", 16)]["generator"] == "numpy.default_rng"
    assert not any(line == 17 for _, line in calls)
    assert len(calls) == 6  # torch.manual_seed's own call of torch.cuda.manual_seed_all is not
    assert seeding["first_parameter"] == {"file": "train.py", "line": 12, "module": "Linear",
                                          "torch_seeded_before": False}
    assert seeding["settings"]["cudnn_benchmark"] == {"gate": False, "training": True}
    assert seeding["settings"]["use_deterministic_algorithms"] == {"gate": False,
                                                                   "training": False}
    fingerprint = json.loads((tmp_path / "run" / ".repro-gate" / FINGERPRINT_FILE).read_text())
    (loader,) = fingerprint["dataloaders"]
    assert (loader["generator"], loader["generator_seeded"]) == (True, True)


def test_in_deterministic_mode_the_gate_seeds_only_when_given_a_seed(tmp_path: Path) -> None:
    user_env = json.dumps({"CUBLAS_WORKSPACE_CONFIG": ":16:8",
                           "gate:CUBLAS_WORKSPACE_CONFIG": ":4096:8"})
    _, unseeded = run(tmp_path / "a", "deterministic", PYTHONHASHSEED="0",
                      CUBLAS_WORKSPACE_CONFIG=":4096:8", **{ENV_USER_ENV: user_env})
    assert unseeded["gate_seed"] is None
    assert unseeded["first_parameter"]["torch_seeded_before"] is False
    assert unseeded["settings"]["use_deterministic_algorithms"] == {"gate": True,
                                                                    "training": False}
    assert "PYTHONHASHSEED" not in unseeded["settings"]  # observed per run, not a setting
    assert unseeded["settings"]["CUBLAS_WORKSPACE_CONFIG"] == {"gate": True, "training": True}
    _, seeded = run(tmp_path / "b", "deterministic", REPRO_GATE_SEED="3")
    assert seeded["gate_seed"] == 3
    assert seeded["first_parameter"]["torch_seeded_before"] is True
