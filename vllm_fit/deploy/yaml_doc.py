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
from .scalars import BREAK, scalar_offsets, skip_properties
from .words import After, Place, Token, Word

MAX_EXPANDED_NODES = 200_000
"""Nodes a file may hold with every alias expanded (a large values file has a few thousand)."""
MAX_DEPTH = 64
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
        sizes: Dict[int, int] = {}
        stack: List[Tuple[Node, int, bool]] = [(root, 1, False)]
        open_nodes: set = set()
        while stack:
            node, depth, done = stack.pop()
            key = id(node)
            if done:
                open_nodes.discard(key)
                sizes[key] = 1 + sum(sizes[id(child)] for child in _children(node))
                if sizes[key] > MAX_EXPANDED_NODES:
                    raise BadInput("%s expands to more than %d YAML nodes through its aliases (an alias bomb?);"
                                   " vllm-fit refuses it" % (self.file, MAX_EXPANDED_NODES))
                continue
            if key in sizes:
                continue
            if key in open_nodes:
                raise BadInput("%s holds a YAML alias that contains itself (line %d); vllm-fit refuses it"
                               % (self.file, node.start_mark.line + 1))
            if depth > MAX_DEPTH:
                raise BadInput("%s is nested more than %d levels deep; no deployment file is" % (self.file, MAX_DEPTH))
            if isinstance(node, MappingNode):
                self._check_keys(node)
            open_nodes.add(key)
            stack.append((node, depth, True))
            stack.extend((child, depth + 1, False) for child in _children(node) if id(child) not in sizes)

    def _check_keys(self, node: MappingNode) -> None:
        seen = set()
        for key, _ in node.value:
            if isinstance(key, ScalarNode) and key.tag != MERGE_TAG:
                if key.value in seen:
                    raise BadInput("%s, line %d: the key %r appears twice in one mapping; YAML and Kubernetes"
                                   " refuse that, fix the file" % (self.file, key.start_mark.line + 1, key.value))
                seen.add(key.value)

    def scalar(self, node: ScalarNode) -> Scalar:
        """The scalar's value with the file offset of each of its characters."""
        found = self._scalars.get(id(node))
        if found is None:
            found = Scalar(node.value, scalar_offsets(self.text, node), node)
            self._scalars[id(node)] = found
        return found


def _children(node: Node) -> List[Node]:
    if isinstance(node, MappingNode):
        return [child for pair in node.value for child in pair]
    if isinstance(node, SequenceNode):
        return list(node.value)
    return []


def items(node: Node) -> List[Tuple[str, Node]]:
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


@dataclass(frozen=True)
class KeySlot:
    """Where a new key of a mapping is written: the offset, the text before the key (a line break and the
    keys' indentation, or ", " in a flow mapping), and the mapping's YAML path."""

    at: int
    opener: str
    path: str
    flow: bool


class Layout:
    """Positions in the file's text for new list items and keys, in the file's own style."""

    def __init__(self, doc: YamlDoc):
        self.doc, self.text = doc, doc.text
        found = BREAK.search(self.text)
        self.newline = found.group(0) if found else "\n"

    def content_end(self, node: Node) -> int:
        """Where the node's own text ends (a block scalar's trailing line breaks and spaces left out)."""
        while isinstance(node, (MappingNode, SequenceNode)) and node.value:
            last = node.value[-1]
            node = last[1] if isinstance(last, tuple) else last
        end = node.end_mark.index
        while end > node.start_mark.index and self.text[end - 1] in " \t\r\n\x85\u2028\u2029":
            end -= 1
        return end

    def line_end(self, at: int) -> int:
        """The end of the line that holds offset `at` (a comment on it stays on it)."""
        found = BREAK.search(self.text, at)
        return found.start() if found else len(self.text)

    def line_start(self, at: int) -> int:
        start = at
        while start > 0 and self.text[start - 1] not in "\r\n\x85\u2028\u2029":
            start -= 1
        return start

    def indent_of(self, at: int) -> str:
        """The white space that puts a new line's text in the column of offset `at`."""
        prefix = self.text[self.line_start(at):at].replace("\ufeff", "")
        return "".join(c if c in " \t" else " " for c in prefix)

    def words(self, seq: SequenceNode, path: str) -> List[Word]:
        """The words of a YAML list of strings, each knowing how an item is added after it."""
        flow = bool(seq.flow_style)
        scalars = [item for item in seq.value if isinstance(item, ScalarNode)]
        quote = _style([item for item in scalars if item.value.startswith("-")] or scalars, "")
        value_quote = _style([item for item in scalars if not item.value.startswith("-")
                              and item.style in ("'", '"')], '"')
        found: List[Word] = []
        for index, item in enumerate(seq.value):
            item_path = "%s[%d]" % (path, index)
            if not isinstance(item, ScalarNode):
                found.append(Word("", (), None, "a YAML %s in a command list" % type(item).__name__, item_path))
                continue
            scalar = self.doc.scalar(item)
            end = self.content_end(item)
            if flow:
                after = After(end, Place.FLOW_ITEM, quote, path=path, value_quote=value_quote)
            else:
                dash = self.text.rfind("-", 0, _skip_back(self.text, item.start_mark.index))
                opener = self.newline + self.indent_of(dash) + self.text[dash:item.start_mark.index]
                if self.text[dash:item.start_mark.index].strip() != "-":
                    opener = self.newline + self.indent_of(dash) + "- "
                after = After(self.line_end(end), Place.BLOCK_ITEM, quote, opener, path, value_quote=value_quote)
            start = skip_properties(self.text, item.start_mark.index)
            token = Token(start, item.end_mark.index, item.style if item.style in ("'", '"') else "") \
                if item.style in (None, "'", '"') else None
            offsets = scalar.offsets if scalar.offsets is not None else (-1,) * len(scalar.value)
            found.append(Word(scalar.value, offsets, after, "", item_path, token))
        return found

    def empty_flow_list(self, seq: SequenceNode, path: str) -> After:
        """Where the first item of an empty flow list `[]` goes."""
        close = self.text.rfind("]", seq.start_mark.index, seq.end_mark.index)
        return After(close, Place.FLOW_ITEM, '"', path=path, first=True)

    def key_slot(self, mapping: MappingNode, path: str) -> Optional[KeySlot]:
        """Where a new key of this mapping goes: after its last line (block) or its last item (flow)."""
        if mapping.flow_style:
            if not mapping.value:
                return KeySlot(self.text.index("{", mapping.start_mark.index) + 1, "", path, True)
            return KeySlot(self.content_end(mapping.value[-1][1]), ", ", path, True)
        if not mapping.value:
            return None
        first_key = mapping.value[0][0]
        indent = self.indent_of(first_key.start_mark.index)
        return KeySlot(self.line_end(self.content_end(mapping)), self.newline + indent, path, False)

    def word(self, node: ScalarNode, path: str) -> Word:
        """A mapping value as one word (a Helm value, a config key's value)."""
        scalar = self.doc.scalar(node)
        offsets = scalar.offsets if scalar.offsets is not None else (-1,) * len(scalar.value)
        start = skip_properties(self.text, node.start_mark.index)
        token = Token(start, node.end_mark.index, node.style if node.style in ("'", '"') else "") \
            if node.style in (None, "'", '"') else None
        return Word(scalar.value, offsets, None, "", path, token)


def _style(items: List[ScalarNode], default: str) -> str:
    """The quote most of these scalars are written with ("" for plain)."""
    styles = [item.style if item.style in ("'", '"') else "" for item in items]
    return max(set(styles), key=styles.count) if styles else default


def _skip_back(text: str, at: int) -> int:
    while at > 0 and text[at - 1] in " \t":
        at -= 1
    return at

