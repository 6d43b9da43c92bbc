"""The text edits that give a server its fit: a value replaced where vLLM reads it, or a setting added.

For each setting the fit decides, the occurrence vLLM keeps (the last) is found in the server's command
line; its value is replaced in place (only the characters it is written with), or, where it is a
runtime's own word (a KServe runtime, a chart default), a later occurrence is added, which wins. A
missing setting is added in the file's style: a list item quoted like the others, a word in the
script or command string, a Helm or --config key. Anything else (a value that comes from outside the
file) is refused, naming where the value is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from ..errors import BadInput
from .fits import Fit
from .servers import Addition, Server
from .vllm_args import Option
from .words import Place

OPTION = {"max_model_len": "--max-model-len", "gpu_memory_utilization": "--gpu-memory-utilization",
          "kv_cache_memory_bytes": "--kv-cache-memory-bytes", "max_num_seqs": "--max-num-seqs"}
OTHER_KNOB = {"--gpu-memory-utilization": "--kv-cache-memory-bytes",
              "--kv-cache-memory-bytes": "--gpu-memory-utilization"}
WHOLE = ("--max-model-len", "--kv-cache-memory-bytes", "--max-num-seqs")
HUMAN = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "K": 2**10, "M": 2**20, "G": 2**30}
HELM_QUOTED_FROM = 10**6
"""Helm renders numbers from 1e6 on in e-notation: such values are written as strings."""


@dataclass(frozen=True)
class Edit:
    """Replace text[start:end] with `text`."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class Change:
    """One setting of one server, before and after (old None: added)."""

    server: Server
    option: str
    old: Optional[str]
    new: str


def read_number(option: str, text: Optional[str]) -> Optional[float]:
    """A value as vLLM parses it: lengths, sizes and counts are whole numbers (8192, 32k, 32K; not
    "8e3" or "1e+06"), a utilization any float; None where vLLM would refuse it."""
    if text is None:
        return None
    text = text.strip()
    if option in WHOLE:
        if text[-1:] in HUMAN and text[:-1].isdigit():
            return float(int(text[:-1]) * HUMAN[text[-1]])
        return float(int(text)) if text.isdigit() else None
    try:
        return float(text)
    except ValueError:
        return None


def _in_config(server: Server, option: str) -> str:
    """Where the option is set when only the server's --config file sets it ("" when its command line does)."""
    return "" if server.args.last(option) is not None else " (in its --config file)"


class Planner:
    """The edits for the servers of one file, and the changes they make."""

    def __init__(self, text: str, file: str):
        self.text, self.file = text, file
        self.edits: List[Edit] = []
        self.changes: List[Change] = []

    def plan(self, server: Server, fit: Fit) -> None:
        """Add the edits that give `server` the fit's settings (BadInput where one cannot be made)."""
        if server.problem:
            raise BadInput("%s, %s: %s; it is left as it is"
                           % (self.file, server.where, server.problem))
        if server.stray_word:
            raise BadInput("%s, %s: %s" % (self.file, server.where, server.stray_word))
        additions: Dict[Tuple[str, int, str], List[Tuple[Addition, str, str]]] = {}
        args = server.args
        for key, value in fit.settings().items():
            option = OPTION[key]
            other = OTHER_KNOB.get(option)
            if other and server.read_args.last(other) is not None:
                raise BadInput("%s, %s: it sets %s%s, which decides the KV cache instead of %s; remove it, or apply"
                               " a fit found with that knob"
                               % (self.file, server.where, other, _in_config(server, other), option))
            winning, current = server.read_args.last(option), args.last(option)
            if winning is not None and read_number(option, winning.value) == read_number(option, value):
                continue
            if current is not None and self._replace(server, current, option, value):
                continue
            if current is not None and current.value is None:
                raise BadInput("%s, %s: its %s has no value (vLLM refuses to start: 'expected one argument'); write"
                               " its value after it" % (self.file, server.where, current.flag.text))
            if current is not None and not _made_by_runtime(current):
                raise BadInput("%s, %s: %s %s is %s; set it where it comes from, or write the value there"
                               % (self.file, server.where, option, current.value, _why_fixed(current)))
            addition = server.addition(option)
            if addition is None or server.cannot_add:
                raise BadInput("%s, %s: it has no %s and %s; add it once by hand" % (
                    self.file, server.where, option, server.cannot_add or "no list or mapping to add it to"))
            place = ("key", addition.slot.at, addition.key if addition.new_list else "") if addition.slot is not None \
                else ("word", addition.after.at if addition.after is not None else -1, "")
            additions.setdefault(place, []).append((addition, option, value))
            self.changes.append(Change(server, option, winning.value if winning else None, value))
        for group in additions.values():
            self.edits.append(self._added(server, group))

    def _replace(self, server: Server, current: Option, option: str, value: str) -> bool:
        """Replace the winning occurrence's value where it is written; False where it cannot be."""
        word = current.value_word()
        if word is None or word.unknown:
            return False
        if len(word.text.split()) > 1:
            raise BadInput("%s, %s: its %s value %r holds a space, which vLLM cannot read as a number (it refuses"
                           " to start); write each option and its value as words of their own"
                           % (self.file, server.where, option, word.text))
        span = word.span()
        quote = '"' if server.key_style == "helm" and float(value) >= HELM_QUOTED_FROM else ""
        if span is not None and not (quote and word.token is not None and not word.token.quote):
            self.edits.append(Edit(span[0], span[1], value))
        elif word.token is not None:  # the whole scalar, written anew (a Helm number rendered otherwise)
            quote = word.token.quote or quote
            self.edits.append(Edit(word.token.start, word.token.end, quote + value + quote))
        else:
            return False
        self.changes.append(Change(server, option, current.value, value))
        return True

    def _added(self, server: Server, group: List[Tuple[Addition, str, str]]) -> Edit:
        addition = group[0][0]
        equals = _uses_equals(server)
        if addition.slot is not None and not addition.new_list:
            lines = "".join("%s%s: %s" % (addition.slot.opener, _key(server, own, option),
                                          _mapping_value(server, value)) for own, option, value in group)
            if addition.slot.flow and not addition.slot.opener:
                lines = lines[2:] if lines.startswith(", ") else lines
            return Edit(addition.slot.at, addition.slot.at, lines)
        words = [w for _, option, value in group for w in ([option + "=" + value] if equals else [option, value])]
        if addition.slot is not None:  # a new list holding the words (extraArgs, an InferenceService's args)
            items = ", ".join('"%s"' % w for w in words)
            return Edit(addition.slot.at, addition.slot.at, "%s%s: [%s]" % (addition.slot.opener, addition.key, items))
        after = addition.after
        assert after is not None
        if after.place is Place.INLINE:
            return Edit(after.at, after.at, "".join(" " + w for w in words))
        quoted = [_item(w, after.quote, after.value_quote) for w in words]
        if after.place is Place.FLOW_ITEM:
            text = ", ".join(quoted)
            return Edit(after.at, after.at, text if after.first else ", " + text)
        return Edit(after.at, after.at, "".join(after.opener + q for q in quoted))

    def apply(self) -> str:
        """The text with every edit made; BadInput where two edits overlap (a value shared through an alias
        by servers that get different values)."""
        unique = sorted(set(self.edits), key=lambda e: (e.start, e.end))
        for first, second in zip(unique, unique[1:]):
            if second.start < first.end or (second.start == first.end == first.start == second.start):
                raise BadInput("%s: two servers would change the same text (offset %d), which they share through"
                               " a YAML alias or merge key; give them one fit, or stop sharing it"
                               % (self.file, second.start))
        text = self.text
        for edit in reversed(unique):
            text = text[:edit.start] + edit.text + text[edit.end:]
        return text


def _made_by_runtime(option: Option) -> bool:
    """A value the runtime writes itself (a KServe runtime's args, a chart default): a later occurrence
    added to the server's own arguments overrides it."""
    word = option.value_word() or option.flag
    return not word.unknown and not word.source and word.token is None and all(o < 0 for o in word.offsets)


def _why_fixed(option: Option) -> str:
    word = option.value_word()
    if word is not None and word.unknown:
        return "set from %s, which this file does not hold" % word.unknown
    if word is not None and word.source:
        return "set in %s" % word.source
    return "written in a way vllm-fit cannot change in place (escapes or line folds inside the value)"


def _uses_equals(server: Server) -> bool:
    """Whether the server writes `--flag=value` (else `--flag value`), by its own options' majority."""
    inline = sum(1 for o in server.args.options if o.inline and o.name.startswith("--"))
    apart = sum(1 for o in server.args.options if not o.inline and o.values and o.flag.offsets[:1] != (-1,))
    return inline > apart


def _item(word: str, flag_quote: str, value_quote: str) -> str:
    """A list item quoted like the list's flags or values; a number always quoted (an argv list holds strings)."""
    quote = flag_quote if word.startswith("-") else (value_quote or '"')
    return quote + word + quote


def _key(server: Server, addition: Addition, option: str) -> str:
    if server.key_style == "helm":
        return addition.key
    name = option[2:]
    return name.replace("-", "_") if addition.key == "_" else name


def _mapping_value(server: Server, value: str) -> str:
    if server.key_style == "helm" and float(value) >= HELM_QUOTED_FROM:
        return '"%s"' % value
    return value

