"""A `sh -c` script's simple commands as the argv words they run, each word expanded and located.

Python's shlex splits words but says nothing of where they are, and an edit needs the place; so the
script is split here (shell_split.py), then each word expanded as the shell would: $VAR and ${VAR}
from the container's environment (split on white space where unquoted), $0...$9, $@ and $* from the
words after the script, reserved words (if, then, do, exec, env, nohup ...) and assignments before a
command dropped. A command substitution, arithmetic or a variable the environment does not hold
leaves the word `unknown`. A here-document is not followed: the script is refused from there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import List, Mapping, Optional, Sequence, Tuple

from .shell_split import RawWord, ShellUnsupported, split
from .words import After, Place, Word

__all__ = ["ShellUnsupported", "commands", "shellwords"]
RESERVED = {"if", "then", "else", "elif", "fi", "do", "done", "while", "until", "for", "case", "esac", "{", "}",
            "!", "time", "exec", "nohup", "command", "builtin", "eval"}
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")

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


def _expand(raw: RawWord, script: Word, env: Mapping[str, Word], positional: Sequence[Word]) -> List[Word]:
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
