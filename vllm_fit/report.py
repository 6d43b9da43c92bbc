"""The fit and the report as data: what the writers and the terminal view present."""

from __future__ import annotations

import datetime
from typing import Any, Dict, List, Mapping, Optional

from . import __version__
from .prepare.envcheck import Interpreter
from .study import StudyResult
from .trial.record import TrialRecord


def now_iso() -> str:
    """The current UTC time, to the second, as ISO 8601."""
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


def headroom_bytes(record: TrialRecord, total_bytes: Optional[int]) -> Optional[int]:
    """Device memory the fit leaves to others: total minus the larger of what vLLM may take
    (utilization x total) and the peak sampled while the trial ran (None without a device total)."""
    if not total_bytes:
        return None
    taken = [max(record.device.get("peak_used_bytes") or [0])]
    utilization = record.llm_kwargs.get("gpu_memory_utilization")
    if utilization is not None:
        taken.append(total_bytes * float(utilization))
    return int(total_bytes - max(taken)) if max(taken) > 0 else None


def fit_summary(record: TrialRecord, total_bytes: Optional[int] = None) -> Dict[str, Any]:
    """The fit as the report states it: the knobs, the capacity, and the request that passed."""
    facts = record.facts
    kwargs = record.llm_kwargs
    utilization = kwargs.get("gpu_memory_utilization")
    if utilization is None and kwargs.get("kv_cache_memory_bytes") is None:
        utilization = facts.gpu_memory_utilization  # vLLM's default, as the engine resolved it
    return {
        "max_model_len": record.length,
        "gpu_memory_utilization": utilization,
        "kv_cache_memory_bytes": kwargs.get("kv_cache_memory_bytes"),
        "tensor_parallel_size": kwargs.get("tensor_parallel_size", 1),
        "kv_cache_tokens": facts.kv_cache_tokens or (facts.num_blocks * facts.block_size
                                                     if facts.num_blocks and facts.block_size else None),
        "kv_cache_blocks": facts.num_blocks,
        "block_size": facts.block_size,
        "max_concurrency": facts.max_concurrency,
        "concurrency": record.concurrency,
        "headroom_bytes": headroom_bytes(record, total_bytes),
        "trial": record.index,
        "request": record.request,
        "engine_args": fit_engine_args(record),
    }


def fit_engine_args(record: TrialRecord) -> Dict[str, Any]:
    """LLM keyword arguments of the fit, with the length the engine really used."""
    args = dict(record.llm_kwargs)
    args["max_model_len"] = record.length
    utilization = args.get("gpu_memory_utilization")
    if utilization is None and args.get("kv_cache_memory_bytes") is None:
        utilization = record.facts.gpu_memory_utilization  # vLLM's default, as the engine resolved it
    if args.get("kv_cache_memory_bytes") is None and utilization is not None:
        args["gpu_memory_utilization"] = utilization
    return args


def environment(interpreter: Interpreter, records: List[TrialRecord],
                extra: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """What the trials ran on: interpreter and versions (as the child saw them when it ran)."""
    seen = next((r.versions for r in records if r.versions.get("vllm")), {})
    env = {
        "python": interpreter.python,
        "python_version": seen.get("python") or interpreter.python_version,
        "vllm_version": seen.get("vllm") or interpreter.vllm_version,
        "vllm_distribution": interpreter.vllm_distribution,
        "torch_version": seen.get("torch") or interpreter.torch_version,
        "cuda_version": seen.get("cuda"),
    }
    env.update(extra or {})
    return env


def device_total_bytes(env: Mapping[str, Any]) -> Optional[int]:
    """The smallest total memory among the devices the preflight saw (None without NVML)."""
    devices = (env.get("preflight") or {}).get("devices") or []
    return min(device["total_bytes"] for device in devices) if devices else None


def build_report(search: Mapping[str, Any], result: StudyResult, env: Mapping[str, Any],
                 wall_time_s: float) -> Dict[str, Any]:
    """The whole JSON report."""
    return {
        "tool": {"name": "vllm-fit", "version": __version__},
        "created": now_iso(),
        "search": dict(search),
        "fit": fit_summary(result.fit, device_total_bytes(env)) if result.fit else None,
        "stop": result.stop.value,
        "stop_reason": result.stop_detail,
        "proven": result.proven,
        "notes": result.notes,
        "launches": result.launches,
        "wall_time_s": round(wall_time_s, 2),
        "trials": [record.to_json() for record in result.records],
        "environment": dict(env),
    }
