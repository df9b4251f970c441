"""The keys of the golden trajectory: where it lives, its tolerance, what a change does."""

from __future__ import annotations

from typing import get_args

from repro_gate.config.keys.base import COMPARISON, ConfigKey, Kind
from repro_gate.config.vary import OnChange

KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("golden.path", Kind.TEXT,
              "golden trajectory: a file, or a folder of one file per machine class"
              " (default {default})",
              ("--golden",), dest="golden", group=COMPARISON, metavar="PATH",
              action_input="golden",
              doc="the golden trajectory run A is compared with ([docs/golden.md](docs/golden.md)):"
                  " a file (always compared), or a folder holding one file per machine class"
                  " (`<class>.json`); `golden: PATH` is short for `golden.path`",
              input_description="Golden trajectory: a file, or a folder of one file per machine"
                                " class. Empty: the config file's golden, else"
                                " .repro-gate/golden/.",
              input_doc="Golden trajectory run A is compared with: a file, or a folder of one"
                        " file per machine class. Default: the config's `golden`, else"
                        " `.repro-gate/golden/`."),
    ConfigKey("golden.tolerance", Kind.TOLERANCE,
              doc="`{loss: {rtol, atol, steps_outside}, tensors: {rtol, atol}}`: the per-step"
                  " loss within `atol + rtol * abs(golden)` except at most `steps_outside` steps,"
                  " the artifacts' tensor summaries within theirs; unset: bitwise",
              doc_flag="none"),
    ConfigKey("golden.on_change", Kind.CHOICE, choices=get_args(OnChange),
              doc="`fail`: a change of the numerics fails the gate (`numerics_changed`, exit 1);"
                  " `warn`: it is reported and the gate passes",
              doc_flag="none"),
)
