"""Where each character of a YAML scalar's value is written in the file.

A plain or quoted scalar on one line maps one to one (less its quotes and escapes); a multi-line one
folds its line breaks; block scalars (`|`, `>`) drop their indentation and fold or keep line breaks.
Each character gets its file offset, or -1 where YAML produced it (a folded space, an escape, a line
break). The result is checked against the value the parser read: where the two differ, the scalar is
treated as not locatable (None), so a wrong guess here can only make a value read-only, never
misplace an edit.
"""

from __future__ import annotations

import re
from typing import List, Optional, Tuple

from ruamel.yaml.nodes import ScalarNode

BREAK = re.compile(r"\r\n|\r|\n|\x85|\u2028|\u2029")
Chars = List[Tuple[str, int]]


def scalar_offsets(text: str, node: ScalarNode) -> Optional[Tuple[int, ...]]:
    """The file offset of each character of `node.value` (-1 where YAML made it up), or None."""
    start, end = skip_properties(text, node.start_mark.index), node.end_mark.index
    style = node.style
    try:
        if style in ("|", ">"):
            chars = _block(text, start, end)
        elif style == "'":
            chars = _single(text, start + 1, end - 1)
        elif style == '"':
            chars = _double(text, start + 1, end - 1)
        else:
            chars = _fold(_lines(text, start, end), quoted=False)
    except (IndexError, ValueError):
        return None
    if "".join(c for c, _ in chars) != node.value:
        return None
    return tuple(offset for _, offset in chars)


def skip_properties(text: str, at: int) -> int:
    """Past an anchor (&a) or tag (!t) before the scalar's own text."""
    while at < len(text) and text[at] in "&!":
        match = re.compile(r"[^\s]+\s+").match(text, at)
        if not match:
            break
        at = match.end()
    return at


def _lines(text: str, start: int, end: int) -> List[Chars]:
    """The raw text between two offsets, split into lines of (character, offset)."""
    lines: List[Chars] = [[]]
    at = start
    while at < end:
        match = BREAK.match(text, at)
        if match:
            lines.append([])
            at = match.end()
            continue
        lines[-1].append((text[at], at))
        at += 1
    return lines


def _fold(lines: List[Chars], quoted: bool) -> Chars:
    """Flow folding: inner lines lose their surrounding white space; one break becomes a space, each empty
    line a newline. An unquoted scalar's first line keeps no trailing space either."""
    out: Chars = []
    pending_breaks = 0
    for index, line in enumerate(lines):
        if index > 0:
            line = _lstrip(line)
        if index < len(lines) - 1 or not quoted:
            line = _rstrip(line)
        if index > 0:
            if not line and index < len(lines) - 1:
                pending_breaks += 1
                continue
            out += [("\n", -1)] * pending_breaks if pending_breaks else [(" ", -1)]
            pending_breaks = 0
        out += line
    return out


def _lstrip(line: Chars) -> Chars:
    at = 0
    while at < len(line) and line[at][0] in " \t":
        at += 1
    return line[at:]


def _rstrip(line: Chars) -> Chars:
    at = len(line)
    while at > 0 and line[at - 1][0] in " \t":
        at -= 1
    return line[:at]


def _single(text: str, start: int, end: int) -> Chars:
    """A single-quoted scalar: `''` is a quote; folded like a flow scalar."""
    out: Chars = []
    for char, offset in _fold(_lines(text, start, end), quoted=True):
        if char == "'" and out and out[-1] == ("'", offset - 1):
            out[-1] = ("'", -1)
            continue
        out.append((char, offset))
    return out


ESCAPES = {"0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f", "r": "\r",
           "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85", "_": "\xa0", "L": "\u2028",
           "P": "\u2029"}
HEX = {"x": 2, "u": 4, "U": 8}


def _double(text: str, start: int, end: int) -> Chars:
    """A double-quoted scalar: escapes become characters at -1; an escaped line break joins lines."""
    lines = _lines(text, start, end)
    out: Chars = []
    joined = False
    for index, line in enumerate(lines):
        if index > 0:
            line = _lstrip(line)
            if not joined:
                if not line and index < len(lines) - 1:
                    out.append(("\n", -1))
                    joined = True  # further empty lines add one newline each, no space
                    continue
                if not (out and out[-1] == ("\n", -1) and _after_empty(lines, index)):
                    out.append((" ", -1))
        joined = False
        last = index == len(lines) - 1
        line = line if last else _rstrip_unescaped(line)
        at = 0
        while at < len(line):
            char, offset = line[at]
            if char != "\\":
                out.append((char, offset))
                at += 1
                continue
            if at + 1 == len(line):  # `\` at the end of a line: the break is escaped
                joined = True
                break
            code = line[at + 1][0]
            if code in ESCAPES:
                out.append((ESCAPES[code], -1))
                at += 2
            elif code in HEX:
                digits = "".join(c for c, _ in line[at + 2:at + 2 + HEX[code]])
                out.append((chr(int(digits, 16)), -1))
                at += 2 + HEX[code]
            else:
                raise ValueError("unknown escape")
    return out


def _after_empty(lines: List[Chars], index: int) -> bool:
    return index > 1 and not _lstrip(lines[index - 1])


def _rstrip_unescaped(line: Chars) -> Chars:
    """Trailing white space goes, unless an escape (`\\ `) put it there."""
    stripped = _rstrip(line)
    if len(stripped) < len(line) and stripped and stripped[-1][0] == "\\":
        return stripped + line[len(stripped):len(stripped) + 1]
    return stripped


def _block(text: str, start: int, end: int) -> Chars:
    """A literal (|) or folded (>) block scalar: the header, then lines at the content's indentation."""
    header = re.compile(r"([|>])([+-]?)([1-9]?)([+-]?)[ \t]*(#[^\r\n]*)?").match(text, start)
    if header is None or header.group(3):
        raise ValueError("explicit indentation is not located")  # relative to the parent: not known here
    folded, chomp = header.group(1) == ">", header.group(2) or header.group(4)
    after = BREAK.match(text, header.end())
    if after is None:
        return []
    lines = _lines(text, after.end(), end)
    if lines and not lines[-1]:
        lines.pop()  # the break that ends the last line opened an empty one
    indent = next((len(line) - len(_lstrip(line)) for line in lines if _lstrip(line)), 0)
    body: List[Tuple[Chars, Optional[int]]] = []  # each content line and the offset of its break
    for line in lines:
        content = line[indent:] if len(line) >= indent else []
        if not _lstrip(line) and len(line) <= indent:
            content = []
        brk = line[-1][1] + 1 if line else None
        body.append((content, brk))
    while body and not body[-1][0] and chomp != "+":
        trailing = body.pop()
        del trailing
    if not body:
        return []
    out: Chars = []
    for index, (content, _) in enumerate(body):
        if index > 0:
            previous = body[index - 1][0]
            if folded and content and previous and not _more_indented(content) and not _more_indented(previous):
                out.append((" ", -1))
            elif folded and not previous and index > 1 and content and not _more_indented(content) \
                    and _folds_into(body, index):
                pass  # the break before an empty line was dropped already
            else:
                out.append(("\n", -1))
        out += content
    if chomp != "-":
        out.append(("\n", -1))
    return out


def _more_indented(content: Chars) -> bool:
    return bool(content) and content[0][0] in " \t"


def _folds_into(body: List[Tuple[Chars, Optional[int]]], index: int) -> bool:
    """In a folded scalar, the break that leads into a run of empty lines is dropped when the lines on both
    sides of the run are plain text (YAML 1.2 §8.1.3); each empty line then gives one newline."""
    at = index - 1
    while at >= 0 and not body[at][0]:
        at -= 1
    return at >= 0 and not _more_indented(body[at][0])
