"""A `sh -c` script's simple commands as the argv words they run, each word expanded and located.

Python's shlex splits words but says nothing of where they are, and an edit needs the place; so the
script is split here (shell_split.py), then each word expanded as the shell would: $VAR and ${VAR}
from the container's environment (split on white space where unquoted), $0...$9, $@ and $* from the
words after the script, reserved words (if, then, do, exec, env, nohup ...) and assignments before a
command dropped. A command substitution, arithmetic or a variable the environment does not hold
leaves the word `unknown`. Assignments the script makes itself (`LEN=8192`, `export LEN=8192`) set
the variable for the commands after them, located where the value is written; one made inside an `if`,
a loop, a `case` or braces (a function) leaves the variable unknown (which branch runs, and when, is not
known here), as do `read`, a `for` loop's variable, and `source`/`.`/`eval` (for every variable). A
here-document's text is input, not a command (shell_split.py skips it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..redact import is_secret_name
from .shell_split import Piece, RawWord, ShellUnsupported, split
from .words import After, Place, Word

__all__ = ["ShellUnsupported", "commands", "quoted_shellwords", "shellwords"]
RESERVED = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "case", "esac", "{", "}",
            "!", "time", "exec", "nohup", "command", "builtin", "eval"}
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
POSITIONAL = re.compile(r"\$[0-9@*]")

def shellwords(command: Word) -> List[Word]:
    """A Compose `command:` or `entrypoint:` string as Compose splits it (no shell runs)."""
    return [word for word, _ in quoted_shellwords(command)]


def quoted_shellwords(command: Word) -> List[Tuple[Word, bool]]:
    """The words of shellwords(), each with whether any of it was quoted (an unquoted word that Compose's
    interpolation leaves empty is no word at all; a quoted one stays)."""
    found = split(command.text, compose=True)
    return [(w, any(p.quoted for p in raw.pieces)) for raw in (found[0] if found else [])
            for w in _expand(raw, command, {}, [])]


OPENERS = {"if", "while", "until", "for", "case", "{"}
CLOSERS = {"fi", "done", "esac", "}"}
DECLARES = {"export", "readonly", "declare", "typeset", "local"}


def commands(script: Word, env: Mapping[str, Word], positional: Optional[Sequence[Word]]) -> List[List[Word]]:
    """The script's simple commands as the argv words they run (reserved words, assignments and `env`
    prefixes removed), every word expanded and placed in the file. `positional`: the words after the
    script ($0 first), None where they are given where the script runs (a script file's arguments)."""
    found = []
    variables: Dict[str, Word] = dict(env)
    depth = 0
    for raw_words in split(script.text):
        words = [w for raw in raw_words for w in _expand(raw, script, variables, positional)]
        depth = _assign(words, variables, depth)
        found.append(_strip_prefix(words))
    return [c for c in found if c]


def _assign(words: List[Word], variables: Dict[str, Word], depth: int) -> int:
    """Record the variables a command sets for the commands after it (an assignment alone, or `export`
    and its kin); returns the nesting depth of if/loop/case/braces after the command's reserved words."""
    at = 0
    while at < len(words) and words[at].text in RESERVED:
        depth += words[at].text in OPENERS
        depth -= words[at].text in CLOSERS and depth > 0
        at += 1
    rest = words[at:]
    first = rest[0].text if rest else ""
    if first in (".", "source", "eval"):
        for name in variables:  # a sourced file or an eval may set any of them
            variables[name] = Word.made("$" + name, unknown="$%s (perhaps set by the script's %s)" % (name, first))
        return depth
    if first == "read" or (at and words[at - 1].text == "for"):
        for word in (rest[1:] if first == "read" else rest[:1]):
            if not word.text.startswith("-"):
                variables[word.text] = Word.made("$" + word.text, unknown="$%s (set by %s as the script runs)"
                                                 % (word.text, "read" if first == "read" else "a for loop"))
        return depth
    if first == "unset":
        for word in rest[1:]:
            variables.pop(word.text, None)
        return depth
    if rest and rest[0].text in DECLARES:
        rest = [w for w in rest[1:] if ASSIGNMENT.match(w.text)]
    elif not all(ASSIGNMENT.match(w.text) for w in rest):
        return depth  # VAR=value before a program sets it for that program only
    for word in rest:
        name = word.text.split("=", 1)[0]
        if depth:
            variables[name] = Word.made("$" + name,
                                        unknown="$%s (set inside an if, a loop, a case or a function)" % name)
        else:
            variables[name] = word.sliced(len(name) + 1, len(word.text))
    return depth


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


def _expand(raw: RawWord, script: Word, env: Mapping[str, Word], positional: Optional[Sequence[Word]]) -> List[Word]:
    """One raw word as the argv words it becomes (several where an unquoted expansion splits, or "$@")."""
    if positional is None:
        raw = RawWord([Piece("dyn", "$" + p.text, p.index, p.quoted) if p.kind == "pos"
                       else p for p in raw.pieces], raw.end)
    elif len(raw.pieces) == 1 and raw.pieces[0].kind == "pos" and raw.pieces[0].text == "@":
        if raw.pieces[0].quoted:
            return list(positional[1:])  # "$@": each argument one word, as it is
        return [part for arg in positional[1:] for part in _split_word(arg)]
    given: Sequence[Word] = positional or ()  # None: every positional piece was made unknown above
    fields: List[_Field] = [_Field()]
    unknown = source = ""
    for piece in raw.pieces:
        if piece.kind == "lit" and not piece.text:
            continue  # '' or "": no character, but the word is there
        if piece.kind == "lit":
            offset = script.offsets[piece.index] if piece.index < len(script.offsets) else -1
            fields[-1].add(piece.text, offset)
            source = source or (script.source if offset < 0 else "")  # a value Compose took from .env
        elif piece.kind == "var" and piece.text in env:
            value = env[piece.text]
            unknown, source = unknown or value.unknown, source or value.source
            _append(fields, value, split=not piece.quoted and not value.unknown)  # unknown: its text is a stand-in
        elif piece.kind == "pos" and piece.text in "@*":
            for index, arg in enumerate(given[1:]):
                if index and (piece.text == "@" or not piece.quoted):
                    fields.append(_Field())
                elif index:
                    fields[-1].add(" ", -1)
                _append(fields, arg, split=not piece.quoted)
                fields[-1].after = arg.after  # a word added after the last argument reaches "$@"
        elif piece.kind == "pos":
            if int(piece.text) < len(given):
                _append(fields, given[int(piece.text)], split=not piece.quoted)
        else:
            unknown = unknown or ("$%s" % piece.text if piece.kind == "var" else shown_expansion(piece.text) +
                                  (" (the script's arguments)" if POSITIONAL.fullmatch(piece.text) else ""))
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
                 or (f.after is not None and f.after.place is not Place.INLINE) else None, unknown, script.path,
                 source=source)
            for i, f in enumerate(fields) if f.chars or (quoted and len(fields) == 1)]


def shown_expansion(text: str) -> str:
    """An expansion as a message quotes it: a long `$(...)` cut short, and a `${VAR:-default}` whose words
    name a secret (`--api-key`, `HF_TOKEN`) without its default."""
    if any(is_secret_name(word) for word in re.findall(r"[A-Za-z][\w-]*", text)):
        found = re.match(r"\$\{[A-Za-z_][A-Za-z0-9_]*", text)
        return found.group(0) + "...}" if found else "$(...)"
    return text if len(text) <= 80 else text[:60] + "...(%d characters)" % len(text)


def _split_word(word: Word) -> List[Word]:
    """An unquoted expansion's fields (split on white space), each keeping its characters' offsets."""
    parts = [m for m in re.finditer(r"[^ \t\n]+", word.text)]
    return [Word(m.group(0), word.offsets[m.start():m.end()], word.after if m.end() == len(word.text) else None,
                 word.unknown, word.path, source=word.source) for m in parts]


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
