"""A shell script split into simple commands of raw words, each piece of a word located in the script.

The POSIX rules that matter for finding a command's argv: quotes ('...', "...", backslash), comments,
line continuations, control operators (; & && | || newline, parentheses), redirections (dropped with
their target), and expansions kept as pieces ($NAME, ${NAME}, $0-$9, $@, $*; $(...), `...` and other
forms as pieces that are not known); a here-document's text is skipped (it is input, not argv).
Compose's own splitting of a command string (go-shellwords) is
the same with `compose=True`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
REDIRECT = re.compile(r"[0-9]*(<<<|<<-|<<|>>|<&|>&|&>|<>|>\||<|>)")
HEREDOC_WORD = re.compile(r"[ \t]*('[^'\n]*'|\"[^\"\n]*\"|[^\s;&|<>()]+)")


OPERATORS = ("&&", "||", ";;", ";", "&", "|", "(", ")")


class ShellUnsupported(ValueError):
    """A construct this splitter does not follow (an unclosed quote, a here-document without its word)."""


@dataclass
class Piece:
    kind: str
    """"lit" (a character of the script), "var" ($NAME), "pos" ($0-$9, $@, $*), "dyn" (not known)."""
    text: str
    index: int = -1
    """The script index of a literal character."""
    quoted: bool = False


@dataclass
class RawWord:
    pieces: List[Piece] = field(default_factory=list)
    end: int = -1
    """The script index just after the word as written."""


def split(script: str, compose: bool = False) -> List[List[RawWord]]:
    """The script's simple commands, each a list of raw words (operators and redirections removed).

    `compose`: Docker Compose's own splitting of a `command:` string (go-shellwords, no shell): `$` and
    backquotes are plain characters (Compose interpolated them before), line breaks are spaces, and an
    unquoted operator or redirection ends the command, the rest silently dropped."""
    commands: List[List[RawWord]] = [[]]
    bodies: List[Tuple[str, bool]] = []
    """Here-documents opened on the current line: their delimiters, and whether tabs are stripped (<<-)."""
    word: Optional[RawWord] = None
    redirect_target = False
    at, n = 0, len(script)

    def finish() -> None:
        nonlocal word, redirect_target
        if word is not None:
            if redirect_target:
                redirect_target = False
            else:
                commands[-1].append(word)
        word = None

    while at < n:
        char = script[at]
        if char in " \t":
            finish()
            at += 1
            continue
        if char == "\\" and at + 1 < n and script[at + 1] == "\n":
            at += 2  # a line continuation joins the lines
            continue
        if char == "\n" or (compose and char in "\r\n"):
            finish()
            if not compose:
                commands.append([])
            at = _after_bodies(script, at + 1, bodies)
            bodies = []
            continue
        if compose and char in ";&|<>":
            break
        if compose and char in "()":
            raise ShellUnsupported("an unquoted parenthesis (Compose refuses the command)")
        if char == "#" and word is None and not compose:
            while at < n and script[at] != "\n":
                at += 1
            continue
        operator = next((op for op in OPERATORS if script.startswith(op, at)), None)
        if (operator and word is None) or (operator and word is not None):
            finish()
            commands.append([])
            at += len(operator)
            continue
        redirect = REDIRECT.match(script, at)
        if redirect and (word is None or all(p.kind == "lit" and p.text.isdigit() for p in word.pieces)):
            word = None
            if redirect.group(1) in ("<<", "<<-"):
                delimiter = HEREDOC_WORD.match(script, redirect.end())
                if delimiter is None:
                    raise ShellUnsupported("a here-document without its word")
                bodies.append((re.sub(r"[\\'\"]", "", delimiter.group(1)), redirect.group(1) == "<<-"))
                at = delimiter.end()
                continue
            at = redirect.end()
            target = re.compile(r"[ \t]*(-|[0-9]+)(?=[\s;&|)]|$)").match(script, at)
            if redirect.group(1) in ("<&", ">&") and target:
                at = target.end()
                continue
            redirect_target = True
            continue
        if word is None:
            word = RawWord()
        at = _piece(script, at, word, compose)
        word.end = at
    finish()
    return [command for command in commands if command]


def _after_bodies(script: str, at: int, bodies: List[Tuple[str, bool]]) -> int:
    """Skip the here-documents' text that starts at `at` (a program's input, not its argv): each runs up
    to a line that is its delimiter (after leading tabs, for <<-), or to the end of the script."""
    for delimiter, strip_tabs in bodies:
        while at < len(script):
            end = script.find("\n", at)
            end = len(script) if end < 0 else end
            line = script[at:end].rstrip("\r")
            at = end + 1
            if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                break
    return min(at, len(script))


def _piece(script: str, at: int, word: RawWord, compose: bool = False) -> int:
    """Read one piece of a word at `at`; return the index after it."""
    char = script[at]
    if char == "'":
        close = script.find("'", at + 1)
        if close < 0:
            raise ShellUnsupported("an unclosed single quote")
        word.pieces += [Piece("lit", script[i], i, True) for i in range(at + 1, close)] or [Piece("lit", "", at, True)]
        return close + 1  # '' alone is still a word: an empty one
    if char == '"':
        if script.startswith('""', at):
            word.pieces.append(Piece("lit", "", at, True))
        at += 1
        while at < len(script) and script[at] != '"':
            if script[at] == "\\" and at + 1 < len(script) and script[at + 1] in '$`"\\\n':
                if script[at + 1] != "\n":
                    word.pieces.append(Piece("lit", script[at + 1], at + 1, True))
                at += 2
            elif script[at] in "$`" and not compose:
                at = _dollar(script, at, word, quoted=True)
            else:
                word.pieces.append(Piece("lit", script[at], at, True))
                at += 1
        if at >= len(script):
            raise ShellUnsupported("an unclosed double quote")
        return at + 1
    if char == "\\" and at + 1 < len(script):
        word.pieces.append(Piece("lit", script[at + 1], at + 1))
        return at + 2
    if char in "$`" and not compose:
        return _dollar(script, at, word, quoted=False)
    word.pieces.append(Piece("lit", char, at))
    return at + 1


def _dollar(script: str, at: int, word: RawWord, quoted: bool) -> int:
    """An expansion: $NAME, ${NAME}, $0-$9, $@, $*; anything else ($(...), `...`, ${X:-y}) is unknown."""
    if script[at] == "`":
        close = script.find("`", at + 1)
        if close < 0:
            raise ShellUnsupported("an unclosed backquote")
        word.pieces.append(Piece("dyn", script[at:close + 1], quoted=quoted))
        return close + 1
    nxt = script[at + 1:at + 2]
    if nxt == "(":
        end = _closing(script, at + 1)
        word.pieces.append(Piece("dyn", script[at:end], quoted=quoted))
        return end
    if nxt == "{":
        close = script.find("}", at + 2)
        if close < 0:
            raise ShellUnsupported("an unclosed ${")
        inner = script[at + 2:close]
        kind = "var" if NAME.fullmatch(inner) else "pos" if inner in "0123456789@*" and inner else "dyn"
        word.pieces.append(Piece(kind, inner if kind != "dyn" else script[at:close + 1], quoted=quoted))
        return close + 1
    if nxt and nxt in "0123456789@*":
        word.pieces.append(Piece("pos", nxt, quoted=quoted))
        return at + 2
    if nxt and nxt in "#?$!-":
        word.pieces.append(Piece("dyn", script[at:at + 2], quoted=quoted))
        return at + 2
    name = NAME.match(script, at + 1)
    if name:
        word.pieces.append(Piece("var", name.group(0), quoted=quoted))
        return name.end()
    word.pieces.append(Piece("lit", "$", at, quoted))
    return at + 1


def _closing(script: str, at: int) -> int:
    """The index after the parenthesis that closes the one at `at` (quotes respected)."""
    depth, i = 0, at
    while i < len(script):
        c = script[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            i = script.find("'", i + 1)
            if i < 0:
                break
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise ShellUnsupported("an unclosed $(")
