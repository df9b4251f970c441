"""The table of configuration keys: for each key of `.repro-gate.yml`, its flag, its action
input and its docs. `KEYS` joins the sections' modules (`run`, `golden`, `vary`, `cost`,
`resume`, `container`, `reporting`, `upgrade`) in the order of `--help`; `base` defines the entries.

The command-line flags (`cli/flags.py`) and the overrides read from them and from the action's
inputs (`config/overrides.py`) come from `KEYS`; so do the README's table of keys, the upgrade
flags of docs/upgrade.md, and the inputs of action.yml and of docs/action.md, which
`config/key_docs.py` writes (`scripts/generate-key-docs`); `config.schema.json` is tested
against it. Defaults are not written here: `ConfigKey.default` reads them from the config model.
A new key is one entry in its section's module, its field in `config/model.py`, the code that
uses it, and its rule in `config.schema.json`.
"""

from __future__ import annotations

from repro_gate.config.keys import (
    container,
    cost,
    golden,
    reporting,
    resume,
    run,
    upgrade,
    vary,
)
from repro_gate.config.keys.base import (
    ActionOnlyInput,
    ConfigKey,
    Kind,
    Scope,
    UpgradeOption,
)
from repro_gate.config.keys.upgrade import UPGRADE_OPTIONS

__all__ = ["ACTION_ONLY", "ACTION_ONLY_INPUTS", "KEYS", "UPGRADE_OPTIONS", "ActionOnlyInput",
           "ConfigKey", "Kind", "Scope", "UpgradeOption", "key"]

KEYS: tuple[ConfigKey, ...] = (*run.KEYS, *golden.KEYS, *vary.KEYS, *cost.KEYS, *resume.KEYS,
                               *container.KEYS, *reporting.KEYS, *upgrade.KEYS)

# The inputs of action.yml that are not configuration keys: they choose the config file, the
# mode and the upgrade's candidate, carry the token, or ask for the attestation's outputs.
ACTION_ONLY: tuple[ActionOnlyInput, ...] = (
    ActionOnlyInput("config",
                    "Path of the config file (default .repro-gate.yml in the workspace, if"
                    " present).",
                    "Config file path. Default: `.repro-gate.yml` in the workspace, if present.",
                    '""', Scope.GATE, first=True),
    ActionOnlyInput("mode",
                    "check (default): the reproducibility gate. upgrade: the dependency-upgrade"
                    " check, the baseline lock against an upgraded one (on a pull request without"
                    " candidate-lock: the base commit's lock against the pull request's, which"
                    " needs actions/checkout with fetch-depth: 0).",
                    "`check` (default): the reproducibility gate. `upgrade`: the"
                    " dependency-upgrade check, see [Upgrade mode](#upgrade-mode). Anything else"
                    " is a configuration error (exit code 2).",
                    "check", Scope.GATE, first=False),
    ActionOnlyInput("attest",
                    "true sets the outputs subject-path, predicate-type and predicate-path for"
                    " actions/attest, which signs the gate's reproducibility statement with the"
                    " workflow's identity (empty when the gate ended in error).",
                    "`true`: set the outputs `subject-path`, `predicate-type` and"
                    " `predicate-path` for `actions/attest`, which signs the gate's"
                    " reproducibility statement with the workflow's identity"
                    " ([docs/attestation.md](attestation.md#keyless-in-github-actions)); empty"
                    " when the gate ended in error. Default `false`.",
                    '"false"', Scope.GATE, first=False),
    ActionOnlyInput("github-token",
                    "Token for the check run, commit status and pull-request comment. It never"
                    " reaches the training container.",
                    "Token for the check run, status and comment. Default `${{ github.token }}`.",
                    "${{ github.token }}", Scope.GATE, first=False),
    ActionOnlyInput("upgrade-packages",
                    "mode upgrade: the packages to upgrade, one per line or comma-separated."
                    " Empty: every package. Not used on a pull request without candidate-lock,"
                    " where the pull request's own lock is the candidate.",
                    "The packages to upgrade, one per line or comma-separated. Empty: every"
                    " package. Not used on a pull request without `candidate-lock`, where the pull"
                    " request's own lock is the candidate.",
                    '""', Scope.UPGRADE, first=True),
    ActionOnlyInput("candidate-lock",
                    "mode upgrade: a lock to check as it is instead of computing one, e.g. the"
                    " lock of a Dependabot or Renovate pull request.",
                    "A lock to check as it is instead of computing one, e.g. the lock of a"
                    " Dependabot or Renovate pull request.",
                    '""', Scope.UPGRADE, first=True),
    ActionOnlyInput("write-lock",
                    "mode upgrade: true copies the candidate lock over the project's lock when the"
                    " check did not end in error (the weekly job then proposes it in a pull"
                    " request).",
                    "`true`: copy the candidate lock over the project's lock when the check did"
                    " not end in error (the weekly workflow then proposes it in a pull request)."
                    " Default `false`.",
                    '"false"', Scope.UPGRADE, first=False),
)
ACTION_ONLY_INPUTS = tuple(entry.name for entry in ACTION_ONLY)


def key(path: str) -> ConfigKey:
    """The key at `path`; KeyError when the table has none."""
    for entry in KEYS:
        if entry.path == path:
            return entry
    raise KeyError(path)
