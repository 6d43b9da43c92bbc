"""Where new text goes in a deployment file, in the file's own style: list items after an item (its line
break, indentation and dash; its comment stays on its line), keys after a mapping's last line, and each
list item as a `Word` that knows how a word is added after it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from .scalars import BREAK, skip_properties
from .words import After, Place, Token, Word
from .yaml_doc import YamlDoc


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

