"""The key of a cached gate result: everything that decides the result is in it, and nothing
that does not."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from repro_gate.config import Config
from repro_gate.environments import Environment
from repro_gate.gate.file_lock import OUTPUT_LOCK
from repro_gate.upgrade.gate_cache import gate_key, inputs_sha256

SHA = "ab" * 32


def environment(tmp_path: Path, pins: str = SHA) -> Environment:
    path = tmp_path / "envs" / "0123"
    return Environment(path / "bin" / "python", pins, {"numlib": "1.0"}, False, path)


def project(tmp_path: Path) -> Config:
    workdir = tmp_path / "project"
    (workdir / "data").mkdir(parents=True)
    (workdir / "train.py").write_text("print('train')\n")
    (workdir / "data" / "x.bin").write_bytes(b"1234")
    return Config(workdir=workdir, output_dir=workdir / "repro-gate-out",
                  command="python train.py", data=(Path("data"),),
                  upgrade=dataclasses.replace(Config.upgrade, cache_dir=str(tmp_path / "envs")))


def key(config: Config, env: Environment) -> str:
    return gate_key(inputs_sha256(config), env)


def test_the_same_inputs_give_the_same_key_and_each_input_changes_it(tmp_path: Path) -> None:
    config, env = project(tmp_path), environment(tmp_path)
    first = key(config, env)
    assert key(config, env) == first
    # what does not decide a run: the output directory and what it holds, the gate's name
    (config.output_dir / "upgrade").mkdir(parents=True)
    (config.output_dir / OUTPUT_LOCK).write_text("")
    assert key(dataclasses.replace(config, name="other"), env) == first
    seen = {first}
    for changed in (
        key(config, environment(tmp_path, pins="cd" * 32)),
        key(dataclasses.replace(config, command="python train.py --epochs 2"), env),
        key(dataclasses.replace(config, runs=3), env),
        key(dataclasses.replace(config, env={"LR": "0.1"}), env),
    ):
        assert changed not in seen
        seen.add(changed)
    (config.workdir / "data" / "x.bin").write_bytes(b"4321")  # same size: the content counts
    data_changed = key(config, env)
    (config.workdir / "notes.txt").write_text("untracked\n")
    new_file = key(config, env)
    train = config.workdir / "train.py"
    train.write_text("print('trained')\n")
    os.utime(train, ns=(1, 1))
    code_changed = key(config, env)
    assert len({data_changed, new_file, code_changed} | seen) == len(seen) + 3
