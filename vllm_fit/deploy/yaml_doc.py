"""A deployment file as YAML nodes with positions: bounded, merge keys applied, every scalar's characters
located in the file.

ruamel.yaml's composer (pure Python, safe: no tag builds an object) gives the node graph with the
character index of every node, and aliases as shared nodes, so nothing is expanded while reading. The
graph is then checked once: no cycle, nesting bounded, the expanded size (every alias counted as the
copy a consumer would make) bounded, no duplicate key. Offsets are indexes into the file's own text
(a byte-order mark counts as its first character; line breaks are whatever the file uses).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from ..errors import BadInput, one_line
from ..files.yaml_text import check_graph, node_children
from .scalars import scalar_offsets

MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass(frozen=True)
class Scalar:
    """A scalar's value and, per character, its offset in the file (-1 where YAML made it up: a folded
    line break, an escape); `offsets` is None where the value could not be located at all."""

    value: str
    offsets: Optional[Tuple[int, ...]]
    node: ScalarNode


class YamlDoc:
    """The documents of one file, checked and bounded; nodes looked up with merge keys applied."""

    def __init__(self, text: str, file: str):
        self.text, self.file = text, file
        try:
            self.docs: List[Node] = [doc for doc in YAML(typ="safe", pure=True).compose_all(text) if doc is not None]
        except (YAMLError, ValueError, RecursionError) as exc:
            raise BadInput("%s is not YAML vllm-fit can read (%s); fix it first, it is left as it is"
                           % (file, one_line(str(exc), 200))) from None
        for doc in self.docs:
            self._check(doc)
        self._scalars: Dict[int, Scalar] = {}

    def _check(self, root: Node) -> None:
        """Refuse cycles, deep nesting, duplicate keys and documents that expand past the bound."""
        check_graph(root, node_children, self.file,
                    on_node=lambda node: self._check_keys(node) if isinstance(node, MappingNode) else None)

    def _check_keys(self, node: MappingNode) -> None:
        seen = set()
        for key, _ in node.value:
            if isinstance(key, ScalarNode) and key.tag != MERGE_TAG:
                if key.value in seen:
                    raise BadInput("%s, line %d: duplicate key %r in one mapping; YAML and Kubernetes refuse"
                                   " that, fix the file" % (self.file, key.start_mark.line + 1, key.value))
                seen.add(key.value)

    def scalar(self, node: ScalarNode) -> Scalar:
        """The scalar's value with the file offset of each of its characters."""
        found = self._scalars.get(id(node))
        if found is None:
            found = Scalar(node.value, scalar_offsets(self.text, node), node)
            self._scalars[id(node)] = found
        return found


def items(node: Optional[Node]) -> List[Tuple[str, Node]]:
    """A mapping's (key, value) pairs with `<<` merges applied (its own keys win, then merged mappings in
    order); keys that are not plain scalars are left out."""
    if not isinstance(node, MappingNode):
        return []
    own = [(k.value, v) for k, v in node.value if isinstance(k, ScalarNode) and k.tag != MERGE_TAG]
    names = {name for name, _ in own}
    merged: List[Tuple[str, Node]] = []
    for key, value in node.value:
        if isinstance(key, ScalarNode) and key.tag == MERGE_TAG:
            for source in (value.value if isinstance(value, SequenceNode) else [value]):
                for name, child in items(source):
                    if name not in names:
                        names.add(name)
                        merged.append((name, child))
    return own + merged


def get(node: Optional[Node], key: str) -> Optional[Node]:
    """The value of `key` in a mapping node (merge keys applied), else None."""
    if node is None:
        return None
    for name, value in items(node):
        if name == key:
            return value
    return None


def is_null(node: Optional[Node]) -> bool:
    """An absent value or YAML's null (`key:`, `key: null`, `~`)."""
    return node is None or (isinstance(node, ScalarNode) and (node.tag or "").endswith(":null"))


def text_of(node: Optional[Node]) -> Optional[str]:
    """A scalar's text (None for anything else, and for YAML's null)."""
    if isinstance(node, ScalarNode) and node.tag != "tag:yaml.org,2002:null":
        return str(node.value)
    return None


def own_key(node: MappingNode, key: str) -> Optional[Tuple[ScalarNode, Node]]:
    """The mapping's own (not merged) key node and value for `key`."""
    for k, v in node.value:
        if isinstance(k, ScalarNode) and k.tag != MERGE_TAG and k.value == key:
            return k, v
    return None


def plain(node: Node) -> Any:
    """The document as comparable data: mappings as dicts (merges applied), sequences as lists, scalars
    as (tag, text). Shared nodes stay shared, so an alias bomb that passed the bound stays small."""
    made: Dict[int, Any] = {}

    def build(current: Node) -> Any:
        key = id(current)
        if key in made:
            return made[key]
        if isinstance(current, MappingNode):
            result: Any = {}
            made[key] = result
            for name, child in items(current):
                result[name] = build(child)
        elif isinstance(current, SequenceNode):
            result = []
            made[key] = result
            result.extend(build(child) for child in current.value)
        else:
            result = (current.tag, current.value)
            made[key] = result
        return result

    return build(node)


def differences(before: Any, after: Any, path: str = "") -> Iterator[str]:
    """The paths where two `plain` documents differ (a changed scalar, a list or mapping whose members
    differ in number or names), every path an alias reaches included."""
    stack = [(before, after, path)]
    while stack:
        old, new, where = stack.pop()
        if old is new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            if list(old) != list(new):
                yield where
                continue
            stack.extend((old[k], new[k], "%s.%s" % (where, k) if where else str(k)) for k in old)
        elif isinstance(old, list) and isinstance(new, list):
            if len(old) != len(new):
                yield where
                continue
            stack.extend((a, b, "%s[%d]" % (where, i)) for i, (a, b) in enumerate(zip(old, new)))
        elif old != new:
            yield where
