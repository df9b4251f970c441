"""The keys of the upgrade check, and its flags that are not keys."""

from __future__ import annotations

from repro_gate.config.keys.base import UPGRADE_CHECK, ConfigKey, Kind, Scope, UpgradeOption

KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("upgrade.lock", Kind.TEXT,
              "the baseline lock (default: uv.lock, else requirements.txt)", ("--lock",),
              dest="upgrade_lock", group=UPGRADE_CHECK, metavar="PATH", action_input="lock",
              scope=Scope.UPGRADE,
              doc="the baseline lockfile, relative to the workdir",
              doc_default="`uv.lock`, else `requirements.txt`",
              input_description="mode upgrade: the baseline lockfile, relative to the working"
                                " directory. Empty: the config file's upgrade.lock, else uv.lock,"
                                " else requirements.txt.",
              input_doc="The baseline lockfile, relative to the working directory. Empty: the"
                        " config's `upgrade.lock`, else `uv.lock`, else `requirements.txt`."),
    ConfigKey("upgrade.inherit_site_packages", Kind.BOOLEAN,
              "layer the locked packages over this interpreter's packages (images that ship"
              " torch)", ("--inherit-site-packages",), group=UPGRADE_CHECK,
              action_input="inherit-site-packages", scope=Scope.UPGRADE,
              doc="layer the locked packages over the running interpreter's packages"
                  " ([below](#environments-and-their-cache))",
              input_description="mode upgrade: true layers the locked packages over the image's"
                                " own packages (images that ship torch). Empty: the config file's"
                                " upgrade.inherit_site_packages, else false.",
              input_doc="`true`: layer the locked packages over the image's own packages,"
                        " installing only the pins it does not already meet (images that ship"
                        " torch). Empty: the config's `upgrade.inherit_site_packages`, else"
                        " `false`."),
    ConfigKey("upgrade.tolerance", Kind.TOLERANCE,
              "'bitwise' or 'atol=X,rtol=Y': how far the numerics may move (default:"
              " --tolerance)", ("--upgrade-tolerance",), group=UPGRADE_CHECK, metavar="SPEC",
              action_input="upgrade-tolerance", scope=Scope.UPGRADE,
              doc="`bitwise` or `atol=X,rtol=Y` (in the file: `bitwise` or `{atol: …, rtol: …}`):"
                  " how far the candidate's numerics may move and still be the same",
              doc_default="the top-level `tolerance`",
              input_description="mode upgrade: how far the candidate's numerics may move and"
                                " still be the same, 'bitwise' or 'atol=X,rtol=Y'. Empty: the"
                                " config file's upgrade.tolerance, else the tolerance.",
              input_doc="How far the candidate's numerics may move and still be the same:"
                        " `bitwise` or `atol=X,rtol=Y`. Empty: the config's `upgrade.tolerance`,"
                        " else `tolerance`."),
    ConfigKey("upgrade.max_bisect_runs", Kind.INTEGER,
              "runs the culprit search may take (default {default})", ("--max-bisect-runs",),
              group=UPGRADE_CHECK, metavar="N", action_input="max-bisect-runs",
              scope=Scope.UPGRADE,
              doc="trials the culprit search may take at most (>= 1)",
              input_description="mode upgrade: training runs the search for the culprit packages"
                                " may take at most. Empty: the config file's"
                                " upgrade.max_bisect_runs, else 32.",
              input_doc="Trials the culprit search may take at most. Empty: the config's"
                        " `upgrade.max_bisect_runs`, else 32."),
    ConfigKey("upgrade.cache_dir", Kind.TEXT, "where environments are cached", ("--env-cache",),
              dest="env_cache", group=UPGRADE_CHECK, metavar="DIR", scope=Scope.UPGRADE,
              doc="where the environments are cached (local mode)"),
)

UPGRADE_OPTIONS: tuple[UpgradeOption, ...] = (
    UpgradeOption("`--upgrade`",
                  "the candidate: every package upgraded (`uv lock --upgrade`, `uv pip compile"
                  " --upgrade`)", first=True),
    UpgradeOption("`--upgrade-package NAME`",
                  "the candidate: only NAME upgraded (repeatable); a name the lock does not pin is"
                  " an error", first=True),
    UpgradeOption("`--candidate-lock PATH`", "the candidate as a file, read as it is", first=True),
    UpgradeOption("`--write-lock`",
                  "after the check, copy the candidate lock over the project's lock (not on"
                  " error)", first=False),
    UpgradeOption("`--json`", "print upgrade.json on stdout instead of the report", first=False),
)
