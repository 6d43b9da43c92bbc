"""What to change when nothing fits, or the fit is shorter than the model's maximum: in numbers.

From the trials' own figures (KV bytes and tokens at a utilization, the device total, the weights)
and config.json: the KV memory missing at the cap for the wanted length, the device that would
hold it, what tensor parallelism 2 and 4 and an fp8 KV cache would give, and who else holds memory.
These are estimates on vLLM's accounting (the budget is utilization x total minus what is not KV);
When no trial measured a pool (the weights or the profile run did not fit), the weights' size (from
the trials, the files or config.json) and the failed allocations bound what is missing from below.
Where a request crashed the engine in code an engine argument controls (engine_hints.py), the diagnosis
is that argument instead; where the length above the fit hung at start or failed its request with the KV
cache holding it, it says so and offers no memory change (none would help). `--explore` (explore.py)
launches the alternatives that can run here.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from ..outcome import OomStage, Outcome
from ..prepare.modelinfo import ModelInfo
from ..report.search_report import SearchReport
from ..strategies.base import ROOM_BLOCKS, lowest_length
from ..trial.record import TrialRecord
from .engine_hints import crash_hint

GIB = float(1 << 30)
NOT_MEMORY = frozenset({Outcome.CRASH, Outcome.ENVIRONMENT, Outcome.BAD_CONFIG})
"""Outcomes whose cause is not memory: no reckoning in memory follows from them."""
NOT_THE_CACHE = {Outcome.TIMEOUT: "did not finish starting within its timeout",
                 Outcome.REQUEST_FAILED: "started, but its full-length request failed with the KV cache holding it"}
"""Failures above a fit that say the KV cache is not what bounds it, and how they read."""


def _gib(value: float) -> str:
    return "%.2f GiB" % (value / GIB)


def _tokens(count: int) -> str:
    return "%d token%s" % (count, "" if count == 1 else "s")


def _full_context(out: Dict[str, Any], lines: List[str], model_max: Optional[int], not_kv: float,
                  per_token: float, cap: float) -> None:
    """The device that would hold the model's whole context, when the wanted length is shorter."""
    if not model_max or model_max <= out["wanted_len"]:
        return
    device = (not_kv + model_max * per_token) / cap
    out["full_context_device_bytes"] = round(device)
    lines.append("the model's full context (%s) needs a device of %s at the cap %.2f"
                 % (_tokens(model_max), _gib(device), cap))


def _lowest_out_of_memory(report: SearchReport) -> Optional[float]:
    """The lowest utilization at which a started engine ran out of memory (its KV allocation or request)."""
    levels = [float(t.llm_kwargs["gpu_memory_utilization"]) for t in report.trials
              if t.outcome is Outcome.OOM and t.facts.oom_stage in (OomStage.REQUEST, OomStage.KV_ALLOCATION)
              and t.llm_kwargs.get("gpu_memory_utilization") is not None]
    return min(levels) if levels else None


def _measured(report: SearchReport, per_token: Optional[float]) -> Optional[Dict[str, Any]]:
    """The trial at the longest length that reported its KV memory (the most of it there: a pool may shrink with
    the length, V0 profiling max_model_len tokens): utilization, KV bytes and tokens, total. V0 prints
    its pool in blocks (tokens: blocks x block size, or the too-long error's), and before 0.6 not in bytes
    (then: tokens x `per_token`)."""
    best: Optional[Dict[str, Any]] = None
    for trial in report.trials:
        facts, args = trial.facts, trial.llm_kwargs
        tokens = facts.kv_cache_tokens or facts.error_capacity_tokens or (
            facts.num_blocks * facts.block_size if facts.num_blocks and facts.block_size else None)
        kv = args.get("kv_cache_memory_bytes")
        kv = float(kv) if kv is not None and tokens else (
            facts.available_kv_gib * GIB if facts.available_kv_gib else
            tokens * per_token if tokens and per_token else None)
        utilization = args.get("gpu_memory_utilization", facts.gpu_memory_utilization)
        if kv is None or not tokens:
            continue
        row: Dict[str, Any] = {"kv": float(kv), "tokens": float(tokens), "utilization": utilization,
                               "total": (facts.total_memory_gib or 0) * GIB, "weights": (facts.weights_gib or 0) * GIB}
        row["length"] = trial.length or 0
        if best is None or (row["length"], row["kv"]) > (best["length"], best["kv"]):
            best = row
    return best


def diagnose(report: SearchReport, model: ModelInfo, tensor_parallel_size: int, cap: Optional[float],
             total_bytes: Optional[float]) -> Optional[Dict[str, Any]]:
    """The diagnosis, or None when the fit reaches the wanted maximum or there is nothing to reckon with
    (no pool measured and the weights' size, the KV cost or the device total unknown)."""
    fit, search = report.fit, report.search
    hint = crash_hint(report.trials)
    if hint is not None and fit is None:  # a crash, not memory: no length or memory setting changes it
        return {"engine_argument": hint.argument, "lines": [hint.line]}
    if fit is None and report.trials and report.trials[-1].outcome in NOT_MEMORY:
        return None  # the search stopped on a cause no length or memory setting changes
    model_max = search.max_len or model.derived_max_len
    shortest = lowest_length(search.min_len, search.granularity) if search.min_len else None
    wanted = model_max if fit else (shortest or model_max)  # no fit: the shortest candidate the search had
    if not wanted or (fit and fit.max_model_len >= wanted):
        return None
    args = dict(search.engine_args)
    from_config = model.kv_bytes_per_rank(tensor_parallel_size, args)
    seen = _measured(report, from_config)
    limit = _not_the_cache(report)
    if limit:
        return _limited(report, limit, seen, cap, total_bytes or (seen or {}).get("total") or None, int(wanted),
                        from_config)
    if seen is None:
        return _without_pool(report, model, tensor_parallel_size, cap, total_bytes, int(wanted), args)
    per_token = float(from_config or seen["kv"] / seen["tokens"])
    total = total_bytes or seen["total"] or None
    need = wanted * per_token
    out: Dict[str, Any] = {"wanted_len": int(wanted), "kv_bytes_per_token": round(per_token),
                           "kv_bytes_needed": round(need), "lines": []}
    lines: List[str] = out["lines"]
    too_high = _lowest_out_of_memory(report)
    if cap is not None and too_high is not None and round(too_high - 0.01, 2) < cap:
        cap = max(0.01, round(too_high - 0.01, 2))
        out["out_of_memory_from"] = too_high
        lines.append("at %.2f and above the engine ran out of memory (the request needs headroom beyond vLLM's"
                     " budget): %.2f is the highest utilization reckoned with" % (too_high, cap))
    at_cap = _kv_at_cap(seen, cap, total)
    if cap is not None and at_cap is not None and total:
        missing = max(0.0, need - at_cap)
        out.update(kv_bytes_at_cap=round(at_cap), missing_bytes=round(missing),
                   device_bytes_needed=round(total + missing / cap))
        lines.append("%s need %s of KV cache; at the cap %.2f there is %s: %s missing (a device of"
                     " %s would hold it)" % (_tokens(wanted), _gib(need), cap, _gib(at_cap), _gib(missing),
                                             _gib(total + missing / cap)))
        _full_context(out, lines, model.derived_max_len, cap * total - at_cap, per_token, cap)
        out["tensor_parallel"] = _tensor_parallel(model, tensor_parallel_size, seen, at_cap, per_token, lines, args)
        if str(args.get("kv_cache_dtype") or "auto").startswith("fp8") or model.dtype_bytes == 1:
            return dict(out, foreign=_foreign(report, lines))
        fp8 = at_cap / (per_token / (model.dtype_bytes or 2))
        out["fp8_kv_tokens"] = int(fp8)
        lines.append("an fp8 KV cache (--engine-arg kv_cache_dtype=fp8, where this vLLM and GPU support it) would"
                     " hold about %d tokens" % fp8)
    else:
        lines.append("%s need %s of KV cache; the pool measured at the longest length held %s (%s)"
                     % (_tokens(wanted), _gib(need), _tokens(int(seen["tokens"])), _gib(seen["kv"])))
    out["foreign"] = _foreign(report, lines)
    return out


def _kv_at_cap(seen: Mapping[str, Any], cap: Optional[float], total: Optional[float]) -> Optional[float]:
    """The KV bytes the measured pool would have at the cap (its level moved there on the device's total), or
    None where the cap, the pool's level or the total is unknown."""
    if cap is None or seen["utilization"] is None or not total:
        return None
    return float(seen["kv"] + (cap - float(seen["utilization"])) * total)


def _not_the_cache(report: SearchReport) -> List[TrialRecord]:
    """The trials at the shortest length above the fit (any length without a fit) that failed, where each failed
    for a cause other than the KV cache (a start that hung, a request that failed with the pool holding its
    sequences and blocks to spare: strategies/base.py's ROOM_BLOCKS); else []."""
    fit = report.fit
    served = {t.length for t in report.trials if t.outcome is Outcome.OK}
    above = [t for t in report.trials if t.length is not None and t.length > (fit.max_model_len if fit else 0)
             and t.length not in served and t.outcome is not Outcome.OK]
    if not above:
        return []
    shortest = min(t.length or 0 for t in above)
    at = [t for t in above if t.length == shortest]
    sequences = report.search.concurrency
    return at if all(t.outcome is Outcome.TIMEOUT or (t.outcome is Outcome.REQUEST_FAILED and t.observation(
        ).pool_holds(sequences, ROOM_BLOCKS)) for t in at) else []


def _limited(report: SearchReport, limit: Sequence[TrialRecord], seen: Optional[Mapping[str, Any]],
             cap: Optional[float], total: Optional[float], wanted: int, per_token: Optional[float]) -> Dict[str, Any]:
    """The diagnosis of a length the KV cache does not bound: what failed there, and the cache's room."""
    first = limit[0]
    out: Dict[str, Any] = {"wanted_len": wanted, "limited_by": {
        "max_model_len": first.length, "outcome": first.outcome.value, "trials": [t.index for t in limit]}}
    lines = ["what stops max_model_len=%d is not the KV cache: it %s (trial%s %s); more KV cache would not lift it"
             % (first.length or 0, NOT_THE_CACHE[first.outcome], "s" if len(limit) > 1 else "",
                ", ".join(str(t.index) for t in limit))]
    out["lines"] = lines
    per_token = per_token or (seen["kv"] / seen["tokens"] if seen else None)
    at_cap = _kv_at_cap(seen, cap, total) if seen is not None else None
    if per_token is not None and cap is not None and at_cap is not None:
        need = wanted * per_token
        missing = max(0.0, need - at_cap)
        out.update(kv_bytes_per_token=round(per_token), kv_bytes_needed=round(need), kv_bytes_at_cap=round(at_cap),
                   missing_bytes=round(missing))
        lines.append("%s need %s of KV cache; at the cap %.2f there is %s%s"
                     % (_tokens(wanted), _gib(need), cap, _gib(at_cap),
                        ": %s short as well" % _gib(missing) if missing else ""))
    out["foreign"] = _foreign(report, lines)
    return out


def _without_pool(report: SearchReport, model: ModelInfo, tp: int, cap: Optional[float],
                  total: Optional[float], wanted: int, args: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """No pool measured: what is not KV is at least the weights per device, and at least what the device
    held when an allocation failed plus what that allocation lacked; the KV cache comes on top."""
    trials = [trial.facts for trial in report.trials]
    loaded = max((c.weights_gib * GIB for c in trials if c.weights_gib), default=None)
    on_disk = model.estimated_weights_bytes
    weights = loaded or (on_disk / tp if on_disk else None)
    per_token = model.kv_bytes_per_rank(tp, dict(args))
    if weights is None or per_token is None or cap is None or not total:
        return None
    failed = [total - c.oom_free_bytes + c.oom_alloc_bytes for c in trials
              if c.oom_alloc_bytes is not None and c.oom_free_bytes is not None]
    not_kv = max([weights, *failed])
    need = not_kv + wanted * per_token
    missing = max(0.0, need - cap * total)
    lines = ["%s need at least %s on the device (the weights %s%s, KV cache %s); at the cap %.2f the"
             " budget is %s: at least %s missing (a device of %s would hold it)"
             % (_tokens(wanted), _gib(need), _gib(weights), "" if loaded else " from %s" % (
                 "the weight files" if model.weights_bytes else "config.json"), _gib(wanted * per_token), cap,
                _gib(cap * total), _gib(missing), _gib(need / cap))]
    out: Dict[str, Any] = {"wanted_len": wanted, "kv_bytes_per_token": per_token,
                           "kv_bytes_needed": wanted * per_token, "weights_bytes": round(weights),
                           "not_kv_bytes_at_least": round(not_kv), "kv_bytes_at_cap": 0,
                           "missing_bytes": round(missing), "device_bytes_needed": round(need / cap),
                           "lines": lines, "tensor_parallel": []}
    _full_context(out, lines, model.derived_max_len, not_kv, per_token, cap)
    for size in (2 * tp, 4 * tp):
        if not model.num_attention_heads or model.num_attention_heads % size:
            continue
        per_device = not_kv - weights + weights * tp / size
        then = model.kv_bytes_per_rank(size, dict(args)) or per_token
        tokens = int(max(0.0, cap * total - per_device) / then)
        out["tensor_parallel"].append({"tensor_parallel_size": size, "kv_tokens_per_device": tokens})
        lines.append("tensor parallelism %d: the weights split to %s per device; %s" % (
            size, _gib(weights * tp / size), "about %d tokens of KV cache" % tokens if tokens else
            "still %s short per device" % _gib(per_device + wanted * then - cap * total)))
    out["fp8_kv_tokens"] = 0
    lines.append("an fp8 KV cache would not help: what does not fit is not the KV cache")
    out["foreign"] = _foreign(report, lines)
    return out


def _tensor_parallel(model: ModelInfo, tp: int, seen: Mapping[str, Any], at_cap: float, per_token: float,
                     lines: List[str], args: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """Per larger TP size: KV tokens per device, with the weights split and the KV heads divided."""
    if not seen["weights"] or not model.num_attention_heads:
        return []
    options = []
    for size in (2 * tp, 4 * tp):
        if model.num_attention_heads % size:
            continue
        weights_then = seen["weights"] * tp / size  # weights per device, split over more ranks
        now, then = model.kv_bytes_per_rank(tp, dict(args)), model.kv_bytes_per_rank(size, dict(args))
        per_token_then = per_token * (then / now if now and then else tp / size)  # KV heads split too
        tokens = int((at_cap + seen["weights"] - weights_then) / per_token_then)
        options.append({"tensor_parallel_size": size, "kv_tokens_per_device": tokens})
        lines.append("tensor parallelism %d: the weights split to %s per device, about %d tokens of KV cache"
                     % (size, _gib(weights_then), tokens))
    return options


def _foreign(report: SearchReport, lines: List[str]) -> List[Dict[str, Any]]:
    """Processes other than vllm-fit's trials that held device memory before the search."""
    preflight = report.environment.preflight
    others = preflight.held_by_others if preflight is not None else []
    if others:
        lines.append("other processes hold device memory: %s" % ", ".join(
            "%s (pid %s, %s)" % (p.name, p.pid, _gib(p.used_bytes or 0)) for p in others))
    return [{"pid": p.pid, "name": p.name, "used_bytes": p.used_bytes} for p in others]
