"""Who seeded the training and who set each determinism setting: `fingerprint.random.seeding`.

Seeding is the training's job: the gate seeds only when `seed` is set. The probe records, per
process, the training's own seeding calls, where the first parameter was created and, for each
setting the gate applies, whether the training set it itself. This module turns the record of
the run that describes the environment into the manifest's words, with the line that reproduces
each setting outside the gate.
"""

from __future__ import annotations

from typing import Any

from repro_gate.config import Config

# The variables the gate sets in deterministic and cost runs, whatever `seed` is. The hash
# seed is not one of them: each deterministic run gets its own (gate/training_run.py), so a
# training whose numbers follow it fails instead of passing on a seed the gate chose.
DETERMINISM_VARIABLES = {"CUBLAS_WORKSPACE_CONFIG": ":4096:8"}

# Generators a training seeds, by the names the probe records; "numpy.default_rng" and
# "torch.cuda" are seeded in addition to the globals, never instead of them.
GLOBAL_GENERATORS = ("torch", "numpy", "random")
NO_RECORD_NOTE = "no seeding was recorded: the probe did not run in this process"


def settings_lines(config: Config) -> list[tuple[str, str]]:
    """(setting, the line that applies it outside the gate), in the order of the report."""
    warn = ", warn_only=True" if config.determinism == "warn" else ""
    lines = [(name, f"export {name}={value}") for name, value in DETERMINISM_VARIABLES.items()]
    lines += [
        ("use_deterministic_algorithms", f"torch.use_deterministic_algorithms(True{warn})"),
        ("cudnn_deterministic", "torch.backends.cudnn.deterministic = True"),
        ("cudnn_benchmark", "torch.backends.cudnn.benchmark = False"),
    ]
    if config.seed is not None:
        lines += [("seed_random", f"random.seed({config.seed})"),
                  ("seed_numpy", f"numpy.random.seed({config.seed})"),
                  ("seed_torch", f"torch.manual_seed({config.seed})")]
    return lines


def seeding(config: Config, runtime: dict[str, Any] | None) -> dict[str, Any]:
    """The `seeding` record from the in-process fingerprint of the describing run."""
    probe = ((runtime or {}).get("random") or {}).get("seeding")
    probe = probe if isinstance(probe, dict) else None
    calls = [dict(call) for call in (probe or {}).get("calls") or [] if isinstance(call, dict)]
    seeded = {call.get("generator") for call in calls}
    first = (probe or {}).get("first_parameter")
    first = dict(first) if isinstance(first, dict) else None
    record: dict[str, Any] = {
        "gate_seed": config.seed,
        "training": calls,
        "first_parameter": first,
        "parameters_before_seeding": _before_seeding(first, config),
        "unseeded": _unseeded(probe, seeded, config),
        "settings": _settings(config, probe, seeded),
    }
    if probe is None:
        record["note"] = NO_RECORD_NOTE
    return record


def _before_seeding(first: dict[str, Any] | None, config: Config) -> bool | None:
    if first is None:
        return None
    return config.seed is None and not first.get("torch_seeded_before")


def _unseeded(probe: dict[str, Any] | None, seeded: set[Any], config: Config) -> list[str]:
    """The global generators nobody seeded (torch and numpy only when the training imported
    them); empty when the gate seeded, or when nothing was recorded."""
    if probe is None or config.seed is not None:
        return []
    imported = probe.get("imported") or {}
    return [name for name in GLOBAL_GENERATORS
            if name not in seeded and imported.get(name, name == "random")]


def _settings(config: Config, probe: dict[str, Any] | None, seeded: set[Any]
              ) -> list[dict[str, Any]]:
    observed = (probe or {}).get("settings") or {}
    out = []
    for name, line in settings_lines(config):
        if name.startswith("seed_"):
            by_training = name.removeprefix("seed_") in seeded
            by_gate = True
        else:
            seen = observed.get(name)
            if not isinstance(seen, dict):
                seen = {}
            by_training = bool(seen.get("training"))
            by_gate = bool(seen.get("gate", probe is None))
        out.append({"name": name, "applied_by_gate": by_gate, "set_by_training": by_training,
                    "reproduce": line})
    return out


def unseeded_anchor(record: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the diagnosis names when the training left torch unseeded, or seeded it only after
    its first parameter was created: the generators and the first parameter's place."""
    if not isinstance(record, dict):
        return None
    unseeded = "torch" in (record.get("unseeded") or [])
    late = bool(record.get("parameters_before_seeding")) and not unseeded
    if not unseeded and not late:
        return None
    first = record.get("first_parameter") or {}
    # torch only: numpy is imported by torch itself, so an unseeded numpy says little.
    anchor: dict[str, Any] = {"generators": ["torch"], "seeded_late": late}
    if isinstance(first.get("file"), str) and first["file"]:
        anchor["file"] = first["file"]
        if isinstance(first.get("line"), int):
            anchor["line"] = first["line"]
    return anchor


def reproduce_lines(record: dict[str, Any] | None) -> list[str]:
    """The lines a training lacks to run as the gate ran it: the settings it did not set."""
    if not isinstance(record, dict):
        return []
    return [str(s["reproduce"]) for s in record.get("settings") or []
            if isinstance(s, dict) and s.get("applied_by_gate") and not s.get("set_by_training")
            and s.get("reproduce")]
