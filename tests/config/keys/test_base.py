"""A configuration key's derived facts: its default from the model, its argparse attribute, its
section and its name."""

from __future__ import annotations

from repro_gate.config.keys import ConfigKey, Kind, Scope
from repro_gate.config.model import CostConfig


def test_the_default_is_read_from_the_model_at_the_keys_path() -> None:
    assert ConfigKey("cost.blocks", Kind.INTEGER).default == CostConfig().blocks
    assert ConfigKey("runs", Kind.INTEGER).default == 2
    assert ConfigKey("tolerance", Kind.TOLERANCE).default == "bitwise"


def test_a_key_the_model_leaves_unset_has_no_default() -> None:
    assert ConfigKey("seed", Kind.INTEGER).default is None
    assert ConfigKey("cost.max_pct", Kind.NUMBER).default is None
    assert ConfigKey("cost.nothing.deeper", Kind.TEXT).default is None
    assert ConfigKey("runs.below_a_number", Kind.TEXT).default is None


def test_the_attribute_is_the_dest_else_the_last_flag() -> None:
    assert ConfigKey("output_dir", Kind.TEXT, flags=("-o", "--output-dir")).attribute == (
        "output_dir")
    assert ConfigKey("cost.max_width_pct", Kind.NUMBER,
                     flags=("--cost-max-width",)).attribute == "cost_max_width"
    assert ConfigKey("cost.enabled", Kind.BOOLEAN, flags=("--cost",),
                     dest="cost_enabled").attribute == "cost_enabled"


def test_section_and_name_split_the_dotted_path() -> None:
    nested = ConfigKey("upgrade.max_bisect_runs", Kind.INTEGER, scope=Scope.UPGRADE)
    top = ConfigKey("image", Kind.TEXT)

    assert (nested.section, nested.name) == ("upgrade", "max_bisect_runs")
    assert (top.section, top.name) == (None, "image")
