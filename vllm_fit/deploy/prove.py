"""Proof that an edited file does what it should, read back the way its runtime reads it.

The edited text is read again by the same reader: every matched server must now get the fit's values
(as vLLM parses them: a length in e-notation is not a length), and everything else of its command
line unchanged; every other server's command line unchanged; and the file's data the same apart from
the matched servers' own parts (so a value shared through an anchor with anything else, or an edit
that broke the YAML, is caught). Otherwise nothing is written.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import BadInput, one_line
from .deployment import Deployment, read_deployment
from .edits import OPTION, read_number
from .fits import Fit
from .servers import Server
from .yaml_doc import differences, plain


def _key(server: Server) -> str:
    return server.where


def prove(before: Deployment, after_text: str, pairs: Sequence[Tuple[Server, Fit]]) -> None:
    """BadInput naming the first way the edited text is not the fit (nothing is written then)."""
    file = str(before.path)
    try:
        after = read_deployment(after_text, file, before.path)
    except BadInput as exc:
        raise BadInput("%s: the edit would leave the file unreadable (%s); it is left as it is"
                       % (file, one_line(str(exc), 200))) from None
    new: Dict[str, Server] = {_key(s): s for s in after.servers}
    if set(new) != {_key(s) for s in before.servers}:
        raise BadInput("%s: the edit would change which servers the file runs; it is left as it is" % file)
    fits = {id(server): fit for server, fit in pairs}
    for old in before.servers:
        edited = new[_key(old)]
        fit = fits.get(id(old))
        if fit is None:
            if edited.effective() != old.effective() or edited.names != old.names:
                raise BadInput("%s, %s: the edit would also change this server, which no fit is for (a value it"
                               " shares through a YAML alias?); it is left as it is" % (file, old.where))
            continue
        _check_fit(file, old, edited, fit)
    regions = [server.path for server, _ in pairs]
    for number, (was, now) in enumerate(zip(before.doc.docs, after.doc.docs), start=1):
        for path in differences(plain(was), plain(now)):
            where = "doc %d, %s" % (number, path) if path else "doc %d" % number
            if not any(_inside(where, region) for region in regions) and not path.startswith("x-"):
                raise BadInput("%s, %s: the edit would change this too, outside the servers it is for (shared"
                               " through a YAML anchor or merge key); it is left as it is" % (file, where))
    if len(before.doc.docs) != len(after.doc.docs):
        raise BadInput("%s: the edit would change the number of YAML documents; it is left as it is" % file)


def _check_fit(file: str, old: Server, edited: Server, fit: Fit) -> None:
    settings = {OPTION[key]: value for key, value in fit.settings().items()}
    got = edited.read_args.effective()
    for option, value in settings.items():
        if read_number(option, got.get(option)) != read_number(option, value):
            raise BadInput("%s, %s: after the edit vLLM would get %s %s, not the fit's %s; it is left as it is"
                           % (file, edited.where, option, got.get(option), value))
    rest = [(k, v) for k, v in old.effective() if k not in settings]
    rest_after = [(k, v) for k, v in edited.effective() if k not in settings]
    if rest != rest_after or edited.names != old.names or edited.model != old.model:
        raise BadInput("%s, %s: the edit would also change %s (a value shared with the one the fit sets: give"
                       " that one its own value or variable); it is left as it is"
                       % (file, edited.where, _changes(rest, rest_after) or "its names"))


def _changes(before: Sequence[Tuple[str, Optional[str]]], after: Sequence[Tuple[str, Optional[str]]]) -> str:
    """The options whose values differ, as "--option old -> new" (at most three; a flag has no value)."""
    was, now = dict(before), dict(after)

    def shown(values: Dict[str, Optional[str]], key: str) -> str:
        return "(absent)" if key not in values else "(flag)" if values[key] is None else str(values[key])

    keys = [k for k in dict.fromkeys([k for k, _ in before] + [k for k, _ in after])
            if (k in was, was.get(k)) != (k in now, now.get(k))]
    return ", ".join("%s %s -> %s" % (k, shown(was, k), shown(now, k)) for k in keys[:3])


def _inside(path: str, region: str) -> bool:
    """The YAML path lies in the region (a whole document, "doc 1", holds "doc 1, key")."""
    return path == region or any(path.startswith(region + mark) for mark in (".", "[", ", "))


def changed_servers(pairs: Sequence[Tuple[Server, Fit]]) -> List[str]:
    return [server.where for server, _ in pairs]
