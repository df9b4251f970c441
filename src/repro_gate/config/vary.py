"""`vary`: the factors of the environment a gate varies one at a time (gate/vary_runs.py), and
what a change of the numbers does, which `golden` shares."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

OnChange = Literal["fail", "warn"]  # a change of the numbers fails the gate, or is reported
# A factor of the environment, in the order the runs that vary them are made; `all` names
# every one.
VaryFactor = Literal["threads", "hostname", "path", "time", "fileordering"]
VARY_FACTORS: tuple[VaryFactor, ...] = get_args(VaryFactor)
VARY_ALL = "all"


@dataclass(frozen=True)
class VaryConfig:
    """`vary`: the factors of the environment varied one at a time, each in a run of its own
    compared with run A, and what a change does (docs/vary.md)."""

    factors: tuple[VaryFactor, ...] = ()  # none: no run varies anything
    on_change: OnChange = "fail"

    @classmethod
    def from_document(cls, value: str | list[str] | dict[str, Any] | None) -> VaryConfig:
        """From the config value: `all`, a comma list, a list, or `{factors, on_change}`."""
        if not isinstance(value, dict):
            value = {"factors": value}
        return cls(factors=vary_factors(value.get("factors")),
                   **({"on_change": value["on_change"]} if "on_change" in value else {}))

    def as_document(self) -> dict[str, Any]:
        return {"factors": list(self.factors), "on_change": self.on_change}


def vary_factors(value: str | list[str] | None) -> tuple[VaryFactor, ...]:
    """The factors a schema-valid value names (a comma list, or a list whose items may be comma
    lists: `--vary threads,path`), each once, in the order of VARY_FACTORS."""
    items = [value] if isinstance(value, str) else list(value or [])
    named = {name.strip() for item in items for name in item.split(",")}
    return tuple(f for f in VARY_FACTORS if f in named or VARY_ALL in named)
