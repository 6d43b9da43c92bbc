"""--explore: the alternatives the diagnosis names that can run here, each searched and verified.

The engine argument a request-time crash points at (engine_hints.py: prefix caching off where a mamba
layer crashed), an fp8 KV cache (where the KV cache is not one byte per element already) and tensor parallelism 2x
and 4x (where that many devices are visible and the heads divide). Each alternative is the same
search with one change, at the fit's own utilization when the fit searched it, so it costs a
length search, not a second utilization search; its fit is proven by a real request like any other.
The main fit and its YAML do not change: the report and the terminal show the alternatives beside it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..errors import BadInput
from ..prepare import Prepared, prepare
from ..prepare.request import ObjectiveKind
from ..report.search_report import ExploreRow, SearchReport
from .engine_hints import crash_hint


@dataclass(frozen=True)
class Alternative:
    """One change to the searched configuration."""

    name: str
    """How the change reads on the command line: `kv_cache_dtype=fp8`, `tensor_parallel_size=2`."""
    engine_args: Mapping[str, Any]
    tensor_parallel_size: int


def alternatives(prepared: Prepared, report: Optional[SearchReport] = None) -> List[Alternative]:
    """The alternatives that can run here: the engine argument a crash points at (first); fp8 KV unless
    the cache is fp8 already; TP where devices allow."""
    request, model = prepared.request, prepared.model
    found: List[Alternative] = []
    hint = crash_hint(report.trials) if report is not None else None
    if hint is not None:
        found.append(Alternative(hint.argument, dict(request.engine_args, **{hint.name: hint.value}),
                                 request.tensor_parallel_size))
    cache = str(request.engine_args.get("kv_cache_dtype") or "auto").lower()
    if not cache.startswith("fp8") and model.dtype_bytes != 1:
        found.append(Alternative("kv_cache_dtype=fp8", dict(request.engine_args, kv_cache_dtype="fp8"),
                                 request.tensor_parallel_size))
    visible = prepared.devices.preflight.visible_count or 0
    for size in (2 * request.tensor_parallel_size, 4 * request.tensor_parallel_size):
        heads = model.num_attention_heads
        if size <= visible and heads and heads % size == 0:
            found.append(Alternative("tensor_parallel_size=%d" % size, dict(request.engine_args), size))
    return found


def _fixed_memory(report: SearchReport, objective: ObjectiveKind) -> Dict[str, Any]:
    """The fit's utilization, when the search chose it: the alternative then searches only the length."""
    fit = report.fit
    if objective is ObjectiveKind.HIGHEST_UTILIZATION and fit is not None and fit.gpu_memory_utilization is not None:
        return {"gpu_memory_utilization": fit.gpu_memory_utilization}
    return {}


SearchOne = Callable[[Prepared], SearchReport]
"""Runs one prepared search and returns its report (fitter.run_search, with the cache)."""


def explore(prepared: Prepared, report: SearchReport, search: SearchOne,
            note: Callable[[str], None]) -> Tuple[ExploreRow, ...]:
    """Search each alternative; one row per alternative for the report, in the order they ran."""
    rows = []
    fixed = _fixed_memory(report, prepared.objective)
    for alternative in alternatives(prepared, report):
        request = dataclasses.replace(prepared.request, engine_args=dict(alternative.engine_args),
                                      tensor_parallel_size=alternative.tensor_parallel_size, explore=False,
                                      **fixed)
        note("explore: %s%s" % (alternative.name, ", at utilization %.2f (the fit's)"
                                % fixed["gpu_memory_utilization"] if fixed else ""))
        try:
            other = prepare(request)
        except BadInput as exc:
            rows.append(ExploreRow(alternative.name, alternative.tensor_parallel_size, dict(alternative.engine_args),
                                   verified=False, stop="refused", stop_reason="refused before a launch: %s" % exc,
                                   launches=0, fit=None, trials=()))
            continue
        found = search(other)
        rows.append(ExploreRow(alternative.name, alternative.tensor_parallel_size, dict(alternative.engine_args),
                               verified=found.fit is not None, proven=found.proven, stop=found.stop.value,
                               stop_reason=found.stop_reason, launches=found.launches, fit=found.fit,
                               trials=found.trials))
    return tuple(rows)
