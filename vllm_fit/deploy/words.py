"""One word of a server's command line, and where it is written in the deployment file.

Every reader (Kubernetes lists, shell scripts, compose strings, Helm values, --config keys) produces
`Word`s: the text the process gets, the file offset of each character (-1 where the runtime made the
character up: an expansion of something the file does not say, a YAML escape, a chart's own flag), and
how a new word is written after it. An edit is only ever made where every character of the replaced
text sits, in order, at consecutive offsets (the bytes a value comes from and nothing else), or where a
word is a whole YAML scalar (`token`), which is then written anew.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Optional, Sequence, Tuple


class Place(Enum):
    """How a word added after another is written."""

    BLOCK_ITEM = "a new item of a block list"
    FLOW_ITEM = "a new item of a flow list"
    INLINE = "a new word of a command string"


@dataclass(frozen=True)
class After:
    """Where and how words are added after a word: file offset, style, the quote of the list's items, the
    text that opens a new block item (line break, indentation, dash), and the YAML path it changes."""

    at: int
    place: Place
    quote: str = '"'
    """How the list quotes its flags ("" for plain)."""
    opener: str = ""
    path: str = ""
    first: bool = False
    """A flow list that is still empty: no separating comma."""
    value_quote: str = '"'
    """How the list quotes its other words; numbers are always quoted (an argv list holds strings)."""


@dataclass(frozen=True)
class Token:
    """A whole YAML scalar that is one word: its span in the file (quotes included) and its quote."""

    start: int
    end: int
    quote: str


@dataclass(frozen=True)
class Word:
    """One argv word: its text, each character's file offset (-1: not written there), where words may be
    added after it, what makes it unknown (an expansion of a value the file does not hold), the YAML
    path of the scalar it is written in, and that scalar when the word is all of it."""

    text: str
    offsets: Tuple[int, ...]
    after: Optional[After] = None
    unknown: str = ""
    path: str = ""
    token: Optional[Token] = None
    source: str = ""
    """Where its value is written when not in this file, though known (Compose's .env: "MAX_LEN=8192 in .env")."""

    @staticmethod
    def made(text: str, unknown: str = "") -> Word:
        """A word the runtime makes up (a chart's own flag, an image's entrypoint): not in the file."""
        return Word(text, (-1,) * len(text), unknown=unknown)

    def span(self, start: int = 0, end: Optional[int] = None) -> Optional[Tuple[int, int]]:
        """The file span that holds text[start:end] exactly, or None where it is not written in one piece."""
        end = len(self.text) if end is None else end
        offsets = self.offsets[start:end]
        if not offsets or offsets[0] < 0 or any(b != a + 1 for a, b in zip(offsets, offsets[1:])):
            return None
        return offsets[0], offsets[-1] + 1

    def sliced(self, start: int, end: int) -> Word:
        """Part of the word (the value of `--flag=value`): no longer a whole scalar."""
        return replace(self, text=self.text[start:end], offsets=self.offsets[start:end], token=None)


def joined(parts: Sequence[Word]) -> Word:
    """Words concatenated into one (their offsets kept, the last one's `after`)."""
    text = "".join(p.text for p in parts)
    offsets = tuple(o for p in parts for o in p.offsets)
    unknown = next((p.unknown for p in parts if p.unknown), "")
    source = next((p.source for p in parts if p.source), "")
    return Word(text, offsets, parts[-1].after if parts else None, unknown, parts[0].path if parts else "",
                source=source)
