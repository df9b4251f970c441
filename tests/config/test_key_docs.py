"""The docs written from the table of keys: cells, rows, tables, action.yml's inputs and the
marked regions they are written into (small tables made here, not the project's)."""

from __future__ import annotations

import pytest
import yaml

from repro_gate.config import key_docs
from repro_gate.config.key_docs import Region, Table
from repro_gate.config.keys import ActionOnlyInput, ConfigKey, Kind, Scope, UpgradeOption

BLOCKS = ConfigKey("cost.blocks", Kind.INTEGER, flags=("--cost-blocks",), doc="blocks per arm",
                   action_input="cost-blocks", input_description="Blocks per arm.",
                   input_doc="Timed blocks per arm.")
BLOCK_STEPS = ConfigKey("cost.block_steps", Kind.INTEGER, flags=("--cost-block-steps",),
                        shares_row=True)
KEEP = ConfigKey("container.keep", Kind.BOOLEAN, flags=("--keep",), shares_row=True)
NAME = ConfigKey("name", Kind.TEXT, flags=("--name",), doc="gate name", action_input="name",
                 input_description="Gate name.", input_doc="The gate's name.")
LOCK = ConfigKey("upgrade.lock", Kind.TEXT, flags=("--lock",), metavar="PATH",
                 scope=Scope.UPGRADE, doc="the baseline lock", doc_default="`uv.lock`",
                 action_input="lock", input_description="The lock.", input_doc="The lock.")
INHERIT = ConfigKey("upgrade.inherit_site_packages", Kind.BOOLEAN,
                    flags=("--inherit-site-packages",), scope=Scope.UPGRADE, doc="layer them")
CONFIG_INPUT = ActionOnlyInput("config", "Config file.", "The config file.", '""', Scope.GATE,
                               first=True)
TOKEN_INPUT = ActionOnlyInput("github-token", "Token.", "The token.", "${{ github.token }}",
                              Scope.GATE, first=False)
TABLE = Table(keys=(NAME, BLOCKS, BLOCK_STEPS, KEEP, LOCK, INHERIT),
              action_only=(CONFIG_INPUT, TOKEN_INPUT),
              upgrade_options=(UpgradeOption("`--upgrade`", "upgrade all", first=True),
                               UpgradeOption("`--json`", "print JSON", first=False)))


def test_defaults_are_shown_as_the_docs_write_them() -> None:
    assert key_docs.shown(True) == "true"
    assert key_docs.shown(0.25) == "0.25"
    assert key_docs.shown(30.0) == "30"
    assert key_docs.shown(["a"]) == '["a"]'
    assert key_docs.default_cell(BLOCKS) == "`16`"
    assert key_docs.default_cell(KEEP) == "`false`"
    assert key_docs.default_cell(KEEP, shared=True) == "off"
    assert key_docs.default_cell(LOCK) == "`uv.lock`"
    assert key_docs.default_cell(ConfigKey("seed", Kind.INTEGER)) == "none"
    assert key_docs.default_cell(
        ConfigKey("report.timeout", Kind.NUMBER, doc_default="{default:g} s")) == "30 s"


def test_keys_that_share_a_row_are_listed_in_the_row_of_the_key_before_them() -> None:
    rows = key_docs.readme_rows(TABLE.keys)

    assert [[entry.path for entry in row] for row in rows] == [
        ["name"], ["cost.blocks", "cost.block_steps", "container.keep"]]
    assert key_docs.readme_table(TABLE).splitlines() == [
        "| key | default | flag | meaning |",
        "|---|---|---|---|",
        "| `name` | `repro-gate` | `--name` | gate name |",
        "| `cost.blocks`, `.block_steps`, `container.keep` | `16`, `4`, off"
        " | `--cost-blocks`, `--cost-block-steps`, `--keep` | blocks per arm |",
    ]


def test_the_upgrade_table_puts_its_own_options_around_the_keys() -> None:
    assert key_docs.upgrade_flag_cell(LOCK) == "`--lock PATH`"
    assert key_docs.upgrade_flag_cell(INHERIT) == (
        "`--inherit-site-packages` / `--no-inherit-site-packages`")
    assert key_docs.upgrade_flag_cell(ConfigKey("upgrade.x", Kind.TEXT)) == "none"
    lines = key_docs.upgrade_table(TABLE).splitlines()
    assert [line.split(" | ")[0] for line in lines[2:]] == [
        "| `--upgrade`", "| `--lock PATH`", "| `--inherit-site-packages` / "
        "`--no-inherit-site-packages`", "| `--json`"]
    assert "| `inherit_site_packages` | `false` | layer them |" in lines[4]


def test_the_inputs_tables_list_the_actions_own_inputs_around_the_keys() -> None:
    assert [entry.name for entry in key_docs.inputs(TABLE, Scope.GATE)] == [
        "config", "name", "cost-blocks", "github-token"]
    assert key_docs.inputs_table(TABLE, Scope.UPGRADE) == (
        "| Input | Meaning |\n|---|---|\n| `lock` | The lock. |\n")


def test_action_inputs_are_valid_yaml_with_their_descriptions_and_defaults() -> None:
    parsed = yaml.safe_load("inputs:\n" + key_docs.action_inputs(TABLE))["inputs"]

    assert list(parsed) == ["config", "name", "cost-blocks", "github-token", "lock"]
    assert parsed["github-token"] == {"description": "Token.", "required": False,
                                      "default": "${{ github.token }}"}
    assert parsed["name"]["default"] == ""


def test_a_description_is_quoted_when_yaml_would_misread_it_and_folded_when_long() -> None:
    assert key_docs.description("Plain words.") == ["    description: Plain words."]
    tricky = "mode: upgrade only"
    quoted = key_docs.description(tricky)
    assert quoted == ['    description: "mode: upgrade only"']
    assert yaml.safe_load(quoted[0].strip())["description"] == tricky
    long = " ".join(["word"] * 40)
    folded = key_docs.description(long)
    assert folded[0] == "    description: >-"
    assert all(len(line) <= key_docs.WIDTH for line in folded)
    assert yaml.safe_load("\n".join(line[4:] for line in folded))["description"] == long


def test_a_region_is_rewritten_between_its_markers_and_the_rest_is_kept() -> None:
    region = Region("docs/x.md", "names", lambda table: "| a |\n")
    text = f"# Title\n{region.begin}stale\n{region.end}after\n"

    assert key_docs.current(text, region) == "stale\n"
    rewritten = key_docs.rewritten(text, region, TABLE)
    assert rewritten == f"# Title\n{region.begin}\n| a |\n\n{region.end}after\n"
    assert key_docs.current(rewritten, region) == region.body(TABLE)


def test_yaml_regions_use_comment_markers_and_no_blank_lines() -> None:
    region = Region("action.yml", "inputs", lambda table: "  x:\n")

    assert region.begin.startswith("  # begin generated: inputs")
    assert region.body(TABLE) == "  x:\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no markers at all\n", "no single pair of markers"),
        ("{begin}{begin}{end}", "no single pair of markers"),
        ("{end}{begin}", "the end marker of 'names' comes first"),
    ],
)
def test_markers_that_are_missing_doubled_or_reversed_are_an_error(text: str,
                                                                   message: str) -> None:
    region = Region("docs/x.md", "names", lambda table: "")

    with pytest.raises(ValueError, match=message):
        key_docs.span(text.format(begin=region.begin, end=region.end), region)
