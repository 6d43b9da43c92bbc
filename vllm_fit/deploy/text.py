"""A deployment file's text: line/column to offsets, where a YAML scalar ends, a shell string's words."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import List


@dataclass
class Token:
    """One command-line word: its text and its span in the file (inside a quoted scalar: the inner span)."""

    text: str
    start: int
    end: int
    quote: str = ""
    """The quote of the list item it is (an item of its own); "" inside a shell string or plain."""


class Text:
    """The file's text with line/column to offset conversion."""

    def __init__(self, text: str):
        self.text = text
        self.starts = [0]
        for match in re.finditer("\n", text):
            self.starts.append(match.end())

    def offset(self, line: int, col: int) -> int:
        return self.starts[line] + col

    def scalar_end(self, start: int, flow: bool) -> int:
        """The end of the scalar that starts at `start` (quoted: after its closing quote)."""
        text, first = self.text, self.text[start:start + 1]
        if first == '"':
            index = start + 1
            while index < len(text) and text[index] != '"':
                index += 2 if text[index] == "\\" else 1
            return index + 1
        if first == "'":
            index = start + 1
            while index < len(text):
                if text[index] == "'" and text[index + 1:index + 2] != "'":
                    return index + 1
                index += 2 if text[index] == "'" else 1
            return index
        stop = re.compile(r"\s#|\n|\r" + (r"|,|\]|\}" if flow else ""))
        match = stop.search(text, start)
        end = match.start() if match else len(text)
        while end > start and text[end - 1] in " \t":
            end -= 1
        return end


def words_of(value: str, start: int) -> List[Token]:
    """A shell string's words with their spans (quotes inside the string are not supported: refused)."""
    return [Token(m.group(0), start + m.start(), start + m.end()) for m in re.finditer(r"\S+", value)]
