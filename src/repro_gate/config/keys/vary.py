"""The keys of `vary`: the factors of the environment varied one at a time, what a change does."""

from __future__ import annotations

from typing import get_args

from repro_gate.config.keys.base import COMPARISON, ConfigKey, Kind
from repro_gate.config.vary import VARY_ALL, VARY_FACTORS, OnChange

FACTOR_NAMES = ", ".join(f"`{name}`" for name in (*VARY_FACTORS, VARY_ALL))

KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("vary.factors", Kind.LIST,
              "vary these factors of the environment, one more run each, compared with run A:"
              " a comma list of " + ", ".join((*VARY_FACTORS, VARY_ALL)) + " (repeatable)",
              ("--vary",), dest="vary", group=COMPARISON, metavar="FACTORS",
              action_input="vary",
              doc="the factors of the environment varied one at a time, each in one more run"
                  " compared with run A ([docs/vary.md](docs/vary.md)): a comma list or a list"
                  f" of {FACTOR_NAMES}; `vary: FACTORS` is short for `vary.factors`",
              input_description="Factors of the environment to vary one at a time, each in one"
                                " more run compared with run A, one per line or comma-separated:"
                                " threads, hostname, path, time, fileordering, or all. Empty: the"
                                " config file's vary, else none.",
              input_doc="Factors of the environment varied one at a time, each in one more run"
                        f" compared with run A: a comma list of {FACTOR_NAMES}. Default: the"
                        " config's `vary`, else none. See [docs/vary.md](vary.md)."),
    ConfigKey("vary.on_change", Kind.CHOICE, choices=get_args(OnChange),
              doc="`fail`: a factor that changes the numbers fails the gate (`not_portable`,"
                  " exit 1); `warn`: it is reported and the gate passes",
              doc_flag="none"),
)
