"""JSON and YAML from files we do not trust, parsed within a size and a node budget.

A YAML alias reuses a node: PyYAML's composer hands back the anchored node itself and its
constructor builds one shared object, so a 400-byte "billion laughs" file parses into little
memory, and the blow-up comes later, from whatever walks the document (a diff visits every
leaf once per path). The budget is therefore on the *expanded* size: while composing, every node
weighs 1 plus its children, an alias weighs what its anchor weighs, and a document heavier than
`MAX_NODES` stops parsing right there. An alias to a node still being composed (a recursive
document) has no finite weight and is refused the same way.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

MAX_BYTES = 64 * 1024 * 1024
MAX_NODES = 1_000_000


class OverBudget(Exception):
    """The file is larger, or expands to more nodes, than the budget allows; says which."""


def read_text(path: Path, max_bytes: int = MAX_BYTES) -> str:
    """The file's UTF-8 text; OverBudget past `max_bytes` (never reads more than that)."""
    with open(path, "rb") as stream:
        data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise OverBudget(f"larger than {max_bytes // (1024 * 1024)} MiB")
    return data.decode("utf-8")


def load_json(text: str) -> Any:
    """The JSON document in `text` (ValueError when invalid, OverBudget when nested too deep)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise OverBudget("nested too deeply") from None


def load_yaml(text: str, max_nodes: int = MAX_NODES) -> Any:
    """The one YAML document in `text` (yaml.YAMLError when there are more), within budget."""
    loader = BoundedLoader(text, max_nodes)
    try:
        return loader.get_single_data()
    except RecursionError:
        raise OverBudget("nested too deeply") from None
    finally:
        loader.dispose()


def load_yaml_all(text: str, max_nodes: int = MAX_NODES) -> list[Any]:
    """Every YAML document in `text`, safely (yaml.SafeLoader) and within `max_nodes`."""
    loader = BoundedLoader(text, max_nodes)
    try:
        documents = []
        while loader.check_data():  # type: ignore[no-untyped-call]  # untyped in PyYAML's stubs
            documents.append(loader.get_data())
        return documents
    except RecursionError:
        raise OverBudget("nested too deeply") from None
    finally:
        loader.dispose()


class BoundedLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that weighs each node as composed, aliases at their expanded size."""

    def __init__(self, text: str, max_nodes: int) -> None:
        super().__init__(text)
        self.max_nodes = max_nodes
        self.weights: dict[int, int] = {}  # id(node) -> expanded size, once composed

    def compose_document(self) -> Any:
        self.weights = {}  # anchors do not cross documents; neither do weights
        return super().compose_document()

    def compose_node(self, parent: Any, index: Any) -> Any:
        is_alias = self.check_event(yaml.AliasEvent)
        node = super().compose_node(parent, index)
        if not is_alias:
            self.weights[id(node)] = self.weight_of(node)
        elif id(node) not in self.weights:
            raise OverBudget("a YAML alias refers to a node that contains it (recursive)")
        return node

    def weight_of(self, node: Any) -> int:
        """1 plus the weights of the node's children; OverBudget past `max_nodes`."""
        if isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = node.value
        else:
            return 1
        weight = 1
        for child in children:
            child_weight = self.weights.get(id(child))
            if child_weight is None:
                raise OverBudget("a YAML alias refers to a node that contains it (recursive)")
            weight += child_weight
        if weight > self.max_nodes:
            raise OverBudget(f"YAML aliases expand it past {self.max_nodes:,} nodes")
        return weight
