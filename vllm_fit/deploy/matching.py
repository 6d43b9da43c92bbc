"""Which server each fit belongs to: by name first, then by model.

A server carrying a fit's entry name or served model name (its container, service, modelSpec or
InferenceService name, or --served-model-name) is that fit's. A fit whose name some server carries
applies to those servers only, never to others of the same model (a prefill server is not the decode
server's). A server carrying another entry's name is left alone. Otherwise a fit applies to the servers
of its model, one per file (two in one file need a name to tell them apart). Templates (KServe
ServingRuntimes) are not servers of their own; a disabled production-stack entry is still edited, so
that it serves when it is enabled.
"""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from ..errors import BadInput
from .fits import Fit, Source
from .servers import Server, normal_model


def _names(fit: Fit) -> List[str]:
    return [n for n in (fit.name, fit.served_model_name) if n]


def match(servers: Sequence[Server], source: Source) -> List[Tuple[Server, Fit]]:
    """Each server with the fit that belongs to it; BadInput where that is ambiguous."""
    live = [s for s in servers if not s.template]
    claimed = {id(fit): any(name in s.names for s in live for name in _names(fit)) for fit in source.fits}
    entry_names = set(source.entry_names) | {n for fit in source.fits for n in _names(fit)}
    pairs: List[Tuple[Server, Fit]] = []
    for server in live:
        named = [fit for fit in source.fits if any(name in server.names for name in _names(fit))]
        if len(named) > 1:
            raise BadInput("%s, %s: %d fits name this server (%s); give the entries distinct names"
                           % (server.file, server.where, len(named), ", ".join(f.label for f in named)))
        if not named and entry_names & set(server.names):
            continue  # another entry's server
        found = named or [fit for fit in source.fits
                          if not claimed[id(fit)] and server.model and normal_model(fit.model) == server.model]
        if len(found) > 1:
            raise BadInput("%s, %s: %d fits are for its model %s (%s); name the entry for this server"
                           % (server.file, server.where, len(found), server.model, ", ".join(f.label for f in found)))
        if found:
            pairs.append((server, found[0]))
    by_file: Dict[Tuple[str, int], List[Server]] = {}
    for server, fit in pairs:
        if not any(name in server.names for name in _names(fit)):
            by_file.setdefault((server.file, id(fit)), []).append(server)
    for (file, _), matched in by_file.items():
        if len(matched) > 1:
            raise BadInput("%s: the fit for %s matches %d servers (%s); name the one it is for (the entry's name,"
                           " --served-model-name, or the container's or service's name)"
                           % (file, matched[0].model, len(matched), "; ".join(s.where for s in matched)))
    return pairs
