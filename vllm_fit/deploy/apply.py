"""`vllm-fit apply`: write fits into the deployment files that run them, in the form each file uses.

Each server found in a file (servers.py) is matched to the fit whose model, entry name or served
model name it carries; the settings the fit decides (max-model-len, the memory knob, max-num-seqs
where --concurrency set it) are replaced in place (a flag's value with or without `=`, a camelCase
Helm key, a dash-case config key; strings stay strings, quotes stay) or added beside the server's
other settings. Everything else keeps its bytes. A value is never lowered without saying why when
the file declares another vLLM version or GPU than the fit was found on.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple

from ..errors import BadInput
from ..files.reading import read_input_text
from .fits import Fit
from .servers import HELM_KEYS, ArgList, Server, Token, find_servers


class Mismatch(BadInput):
    """A value would be lowered on a deployment that declares another vLLM version or GPU."""


@dataclass
class Change:
    """One setting of one server: its old and new value (old None: added)."""

    server: Server
    key: str
    old: Optional[str]
    new: str


def _normal(model: Optional[str]) -> Optional[str]:
    return model.rstrip("/") if model else None


def match(servers: Sequence[Server], fits: Sequence[Fit]) -> List[Tuple[Server, Fit]]:
    """Each server with the one fit that belongs to it (by model, entry name or served model name)."""
    pairs = []
    for server in servers:
        found = [fit for fit in fits if _normal(fit.model) == _normal(server.model)
                 or (fit.name and fit.name in server.names)
                 or (fit.served_model_name and fit.served_model_name in server.names)]
        if len(found) > 1:
            raise BadInput("%s, %s: %d fits match this server (%s); give the entries distinct models or names"
                           % (server.file, server.where, len(found), ", ".join(f.name or f.source for f in found)))
        if found:
            pairs.append((server, found[0]))
    for fit in fits:
        mine = [server for server, matched in pairs if matched is fit]
        by_model = [s for s in mine if not (fit.name and fit.name in s.names)]
        if len(by_model) > 1:
            raise BadInput("%s matches %d servers (%s); name the one it is for (--served-model-name or the"
                           " entry's name)" % (fit.source, len(by_model), "; ".join("%s, %s" % (s.file, s.where)
                                                                                    for s in by_model)))
    return pairs


def _formatted(value: Any) -> str:
    if isinstance(value, float):
        return ("%.4f" % value).rstrip("0").rstrip(".")
    return str(value)


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def _find_flag(args: List[ArgList], key: str) -> Optional[Tuple[Token, int, int]]:
    """(the token holding the value, value start, value end) of --key VALUE or --key=VALUE."""
    flag = _flag(key)
    for arglist in args:
        tokens = arglist.tokens
        for index, token in enumerate(tokens):
            if token.text == flag and index + 1 < len(tokens):
                value = tokens[index + 1]
                return value, value.start, value.end
            if token.text.startswith(flag + "="):
                return token, token.start + len(flag) + 1, token.end
    return None


def _append_flag(arglist: ArgList, key: str, value: str) -> Tuple[int, str]:
    """Where and what to insert to add `--key value` in the style of the list's other words."""
    flag = _flag(key)
    equals = sum(1 for t in arglist.tokens if re.match(r"--[\w-]+=", t.text))
    pairs = sum(1 for a, b in zip(arglist.tokens, arglist.tokens[1:])
                if re.fullmatch(r"--[\w-]+", a.text) and not b.text.startswith("-"))
    uses_equals = equals > pairs
    words = [flag + "=" + value] if uses_equals else [flag, value]
    if arglist.item_prefix is not None:  # a block list: one item per word, quoted like the others
        return arglist.append_at, "".join(arglist.item_prefix + _quoted(word, arglist.quote) for word in words)
    if arglist.flow:
        return arglist.append_at, "".join(", " + _quoted(word, arglist.quote) for word in words)
    return arglist.append_at, "".join(" " + word for word in words)  # inside one shell string


def _quoted(word: str, quote: str) -> str:
    """A list item: numbers are quoted (an args list holds strings); flags quoted as the list quotes."""
    quote = quote or '"'
    return "%s%s%s" % (quote, word, quote) if quote else word


def plan_changes(server: Server, fit: Fit, text: str) -> Tuple[List[Change], List[Tuple[int, int, str]]]:
    """The settings that differ and the text edits (start, end, replacement) that make them so."""
    changes, edits = [], []
    settings = fit.settings()
    for key, value in settings.items():
        new = _formatted(value)
        if server.key_style == "config" or (server.key_style == "helm" and key in HELM_KEYS):
            span = server.keys.get(key)
            if span is not None:
                old_raw = text[span[0]:span[1]]
                quote = old_raw[:1] if old_raw[:1] in "\"'" else ""
                old = old_raw[1:-1] if quote else old_raw
                if old != new and not _same_number(old, new):
                    changes.append(Change(server, key, old, new))
                    edits.append((span[0] + len(quote), span[1] - len(quote), new))
                continue
            if server.mapping_end is None:
                raise BadInput("%s, %s: no %s to update and no plain mapping to add it to; add it once by hand"
                               % (server.file, server.where, _name(server, key)))
            changes.append(Change(server, key, None, new))
            edits.append((server.mapping_end, server.mapping_end, "\n%s%s: %s" % (
                server.mapping_indent, _name(server, key), new)))
            continue
        found = _find_flag(server.args, key)
        if found is not None:
            token, start, end = found
            old = text[start:end] if start >= 0 else token.text
            if old != new and not _same_number(old, new):
                if start < 0:
                    raise BadInput("%s, %s: %s is in a scalar that spans lines; edit it by hand"
                                   % (server.file, server.where, _flag(key)))
                changes.append(Change(server, key, old, new))
                edits.append((start, end, new))
            continue
        if not server.args:
            raise BadInput("%s, %s: no argument list to add %s to; add it once by hand"
                           % (server.file, server.where, _flag(key)))
        at, insert = _append_flag(server.args[-1], key, new)
        changes.append(Change(server, key, None, new))
        edits.append((at, at, insert))
    return changes, edits


def _name(server: Server, key: str) -> str:
    return HELM_KEYS[key] if server.key_style == "helm" else key.replace("_", "-")


def _same_number(old: str, new: str) -> bool:
    try:
        return float(old) == float(new)
    except ValueError:
        return False


def _lowered(change: Change) -> bool:
    try:
        return change.old is not None and float(change.new) < float(change.old)
    except ValueError:
        return False


def _squash(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower().replace("nvidia", ""))


def mismatch(server: Server, fit: Fit) -> Optional[str]:
    """Why this fit may not hold for this server: another vLLM version in its image tag, another GPU in
    its node selector or labels (None when the file declares nothing else)."""
    if server.image and fit.vllm_version:
        tag = re.search(r":v?(\d+\.\d+(?:\.\d+)?)", server.image)
        found = re.match(r"\d+\.\d+(?:\.\d+)?", fit.vllm_version)
        if tag and found and tag.group(1) != found.group(0):
            return "the image %s runs vLLM %s, the fit was found on %s" % (server.image, tag.group(1), found.group(0))
    if server.gpu_labels and fit.gpu:
        mine = _squash(fit.gpu)
        labels = [_squash(label) for label in server.gpu_labels]
        if not any(label and (label in mine or mine in label) for label in labels):
            return "the deployment asks for %s, the fit was found on %s" % (", ".join(server.gpu_labels), fit.gpu)
    return None


@dataclass
class FileResult:
    """One file: its text before and after, and the changes."""

    path: Path
    before: str
    after: str
    changes: List[Change]
    matched: int
    """Servers in the file that a fit belongs to."""

    @property
    def diff(self) -> str:
        return "".join(difflib.unified_diff(self.before.splitlines(True), self.after.splitlines(True),
                                            "a/%s" % self.path, "b/%s" % self.path))


def apply_to_file(path: Path, fits: Sequence[Fit], allow_mismatch: bool) -> FileResult:
    """The file with every matching server's settings set to its fit (not written here)."""
    text = read_input_text(path, "deployment file")
    servers = find_servers(text, str(path))
    pairs = match(servers, fits)
    edits: List[Tuple[int, int, str]] = []
    changes: List[Change] = []
    for server, fit in pairs:
        found, planned = plan_changes(server, fit, text)
        why = mismatch(server, fit)
        lowered = [c for c in found if _lowered(c)]
        if why and lowered and not allow_mismatch:
            raise Mismatch("%s, %s: would lower %s, but %s; refit there, or pass --allow-mismatch" % (
                path, server.where, ", ".join("%s %s -> %s" % (c.key, c.old, c.new) for c in lowered), why))
        changes += found
        edits += planned
    after = text
    for start, end, replacement in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        after = after[:start] + replacement + after[end:]
    return FileResult(path, text, after, changes, len(pairs))
