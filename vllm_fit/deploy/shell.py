"""A `sh -c` script as the shell splits it: simple commands of words, each word expanded, with positions.

Python's shlex splits words but says nothing of where they are, and an edit needs the place; so this
is a small POSIX word splitter: quotes ('...', "...", backslash), comments, line continuations,
control operators (; & && | || newline, parentheses), redirections (dropped from the argv, with their
target), reserved words before a command (if, then, do, exec, env, nohup ...) and assignments. Words
are expanded as the shell would: $VAR and ${VAR} from the container's environment (split on white
space where unquoted), $0...$9, $@ and $* from the words after the script. A command substitution,
arithmetic or a variable the environment does not hold leaves the word `unknown`. A here-document is
not followed: the script is refused from there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List, Mapping, Optional, Sequence, Tuple

from .words import After, Place, Word

OPERATORS = ("&&", "||", ";;", ";", "&", "|", "(", ")")
RESERVED = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "case", "esac", "{", "}",
            "!", "time", "exec", "nohup", "command", "builtin", "eval"}
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class ShellUnsupported(ValueError):
    """A construct this splitter does not follow (a here-document, an unclosed quote)."""


@dataclass
class _Piece:
    kind: str
    """"lit" (a character of the script), "var" ($NAME), "pos" ($0-$9, $@, $*), "dyn" (not known)."""
    text: str
    index: int = -1
    """The script index of a literal character."""
    quoted: bool = False


@dataclass
class _Raw:
    pieces: List[_Piece] = field(default_factory=list)
    end: int = -1
    """The script index just after the word as written."""


def split(script: str, compose: bool = False) -> List[List[_Raw]]:
    """The script's simple commands, each a list of raw words (operators and redirections removed).

    `compose`: Docker Compose's own splitting of a `command:` string (go-shellwords, no shell): `$` and
    backquotes are plain characters (Compose interpolated them before), line breaks are spaces, and an
    unquoted operator or redirection ends the command, the rest silently dropped."""
    commands: List[List[_Raw]] = [[]]
    word: Optional[_Raw] = None
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
            at += 1
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
        redirect = re.compile(r"[0-9]*(<<|>>|<&|>&|&>|<>|>\||<|>)").match(script, at)
        if redirect and (word is None or all(p.kind == "lit" and p.text.isdigit() for p in word.pieces)):
            if redirect.group(1) == "<<":
                raise ShellUnsupported("a here-document")
            word = None
            at = redirect.end()
            target = re.compile(r"[ \t]*(-|[0-9]+)(?=[\s;&|)]|$)").match(script, at)
            if redirect.group(1) in ("<&", ">&") and target:
                at = target.end()
                continue
            redirect_target = True
            continue
        if word is None:
            word = _Raw()
        at = _piece(script, at, word, compose)
        word.end = at
    finish()
    return [command for command in commands if command]


def _piece(script: str, at: int, word: _Raw, compose: bool = False) -> int:
    """Read one piece of a word at `at`; return the index after it."""
    char = script[at]
    if char == "'":
        close = script.find("'", at + 1)
        if close < 0:
            raise ShellUnsupported("an unclosed single quote")
        word.pieces += [_Piece("lit", script[i], i, True) for i in range(at + 1, close)]
        return close + 1
    if char == '"':
        at += 1
        while at < len(script) and script[at] != '"':
            if script[at] == "\\" and at + 1 < len(script) and script[at + 1] in '$`"\\\n':
                if script[at + 1] != "\n":
                    word.pieces.append(_Piece("lit", script[at + 1], at + 1, True))
                at += 2
            elif script[at] in "$`" and not compose:
                at = _dollar(script, at, word, quoted=True)
            else:
                word.pieces.append(_Piece("lit", script[at], at, True))
                at += 1
        if at >= len(script):
            raise ShellUnsupported("an unclosed double quote")
        return at + 1
    if char == "\\" and at + 1 < len(script):
        word.pieces.append(_Piece("lit", script[at + 1], at + 1))
        return at + 2
    if char in "$`" and not compose:
        return _dollar(script, at, word, quoted=False)
    word.pieces.append(_Piece("lit", char, at))
    return at + 1


def _dollar(script: str, at: int, word: _Raw, quoted: bool) -> int:
    """An expansion: $NAME, ${NAME}, $0-$9, $@, $*; anything else ($(...), `...`, ${X:-y}) is unknown."""
    if script[at] == "`":
        close = script.find("`", at + 1)
        if close < 0:
            raise ShellUnsupported("an unclosed backquote")
        word.pieces.append(_Piece("dyn", script[at:close + 1], quoted=quoted))
        return close + 1
    nxt = script[at + 1:at + 2]
    if nxt == "(":
        end = _closing(script, at + 1)
        word.pieces.append(_Piece("dyn", script[at:end], quoted=quoted))
        return end
    if nxt == "{":
        close = script.find("}", at + 2)
        if close < 0:
            raise ShellUnsupported("an unclosed ${")
        inner = script[at + 2:close]
        kind = "var" if NAME.fullmatch(inner) else "pos" if inner in "0123456789@*" and inner else "dyn"
        word.pieces.append(_Piece(kind, inner if kind != "dyn" else script[at:close + 1], quoted=quoted))
        return close + 1
    if nxt and nxt in "0123456789@*":
        word.pieces.append(_Piece("pos", nxt, quoted=quoted))
        return at + 2
    if nxt and nxt in "#?$!-":
        word.pieces.append(_Piece("dyn", script[at:at + 2], quoted=quoted))
        return at + 2
    name = NAME.match(script, at + 1)
    if name:
        word.pieces.append(_Piece("var", name.group(0), quoted=quoted))
        return name.end()
    word.pieces.append(_Piece("lit", "$", at, quoted))
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


def shellwords(command: Word) -> List[Word]:
    """A Compose `command:` or `entrypoint:` string as Compose splits it (no shell runs)."""
    found = split(command.text, compose=True)
    return [w for raw in (found[0] if found else []) for w in _expand(raw, command, {}, [])]


def commands(script: Word, env: Mapping[str, Word], positional: Sequence[Word]) -> List[List[Word]]:
    """The script's simple commands as the argv words they run (reserved words, assignments and `env`
    prefixes removed), every word expanded and placed in the file."""
    found = []
    for raw_words in split(script.text):
        words = [w for raw in raw_words for w in _expand(raw, script, env, positional)]
        found.append(_strip_prefix(words))
    return [c for c in found if c]


def _strip_prefix(words: List[Word]) -> List[Word]:
    """Drop what runs before the program: reserved words, VAR=value assignments, `env [-i] [VAR=v]...`."""
    at = 0
    while at < len(words):
        text = words[at].text
        if text in RESERVED or ASSIGNMENT.match(text):
            at += 1
        elif text in ("env", "/usr/bin/env"):
            at += 1
            while at < len(words) and (words[at].text.startswith("-") or ASSIGNMENT.match(words[at].text)):
                at += 1
        else:
            break
    return words[at:]


def _expand(raw: _Raw, script: Word, env: Mapping[str, Word], positional: Sequence[Word]) -> List[Word]:
    """One raw word as the argv words it becomes (several where an unquoted expansion splits, or "$@")."""
    if len(raw.pieces) == 1 and raw.pieces[0].kind == "pos" and raw.pieces[0].text == "@":
        if raw.pieces[0].quoted:
            return list(positional[1:])  # "$@": each argument one word, as it is
        return [part for arg in positional[1:] for part in _split_word(arg)]
    fields: List[_Field] = [_Field()]
    unknown = ""
    for piece in raw.pieces:
        if piece.kind == "lit":
            fields[-1].add(piece.text, script.offsets[piece.index] if piece.index < len(script.offsets) else -1)
        elif piece.kind == "var" and piece.text in env:
            value = env[piece.text]
            unknown = unknown or value.unknown
            _append(fields, value, split=not piece.quoted)
        elif piece.kind == "pos" and piece.text in "@*":
            for index, arg in enumerate(positional[1:]):
                if index and (piece.text == "@" or not piece.quoted):
                    fields.append(_Field())
                elif index:
                    fields[-1].add(" ", -1)
                _append(fields, arg, split=not piece.quoted)
                fields[-1].after = arg.after  # a word added after the last argument reaches "$@"
        elif piece.kind == "pos":
            if int(piece.text) < len(positional):
                _append(fields, positional[int(piece.text)], split=not piece.quoted)
        else:
            unknown = unknown or ("$%s" % piece.text if piece.kind == "var" else piece.text)
            for char in ("${%s}" % piece.text if piece.kind == "var" else piece.text):
                fields[-1].add(char, -1)
    if not any(f.chars for f in fields) and not any(p.quoted for p in raw.pieces):
        return []  # an unquoted expansion of nothing is no word at all
    end = script.offsets[raw.end - 1] + 1 if 0 < raw.end <= len(script.offsets) and \
        script.offsets[raw.end - 1] >= 0 else -1
    if fields[-1].after is None and end >= 0:
        fields[-1].after = After(end, Place.INLINE, path=script.path)
    quoted = any(p.quoted for p in raw.pieces)
    return [Word("".join(c for c, _ in f.chars), tuple(o for _, o in f.chars), f.after if i == len(fields) - 1
                 or (f.after is not None and f.after.place is not Place.INLINE) else None, unknown, script.path)
            for i, f in enumerate(fields) if f.chars or (quoted and len(fields) == 1)]


def _split_word(word: Word) -> List[Word]:
    """An unquoted expansion's fields (split on white space), each keeping its characters' offsets."""
    parts = [m for m in re.finditer(r"[^ \t\n]+", word.text)]
    return [Word(m.group(0), word.offsets[m.start():m.end()], word.after if m.end() == len(word.text) else None,
                 word.unknown, word.path) for m in parts]


@dataclass
class _Field:
    chars: List[Tuple[str, int]] = field(default_factory=list)
    after: Optional[After] = None

    def add(self, char: str, offset: int) -> None:
        self.chars.append((char, offset))
        self.after = None  # text after an expanded argument: new words no longer follow it


def _append(fields: List[_Field], value: Word, split: bool) -> None:
    for char, offset in zip(value.text, value.offsets):
        if split and char in " \t\n":
            if fields[-1].chars:
                fields.append(_Field())
            continue
        fields[-1].add(char, offset)
