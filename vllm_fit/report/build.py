"""The report of a search built from its study: the fit summary, the environment, the whole record."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any, Dict, List, Mapping, Optional

from .. import __version__
from ..advice.diagnosis import diagnose
from ..gpu import Preflight
from ..prepare import Prepared
from ..prepare.envcheck import Interpreter
from ..prepare.request import OPTIONS, applied_options
from ..redact import public_args
from ..study import StudyResult
from ..trial.record import TrialRecord
from .search_report import SearchReport
from .sections import CacheInfo, FitSummary, ReportEnvironment, SearchSettings


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


def fit_summary(record: TrialRecord, total_bytes: Optional[int] = None) -> FitSummary:
    """The fit as the report states it: the knobs, the capacity, and the request that passed."""
    facts = record.facts
    kwargs = record.llm_kwargs
    utilization = kwargs.get("gpu_memory_utilization")
    if utilization is None and kwargs.get("kv_cache_memory_bytes") is None:
        utilization = facts.gpu_memory_utilization  # vLLM's default, as the engine resolved it
    return FitSummary(
        max_model_len=int(record.length or 0), gpu_memory_utilization=utilization,
        kv_cache_memory_bytes=kwargs.get("kv_cache_memory_bytes"),
        tensor_parallel_size=kwargs.get("tensor_parallel_size", 1),
        kv_cache_tokens=facts.kv_cache_tokens or (facts.num_blocks * facts.block_size
                                                  if facts.num_blocks and facts.block_size else None),
        kv_cache_blocks=facts.num_blocks, block_size=facts.block_size, max_concurrency=facts.max_concurrency,
        concurrency=record.concurrency, headroom_bytes=headroom_bytes(record, total_bytes), trial=record.index,
        request=record.request, engine_args=fit_engine_args(record))


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


def environment(interpreter: Interpreter, records: List[TrialRecord], preflight: Optional[Preflight] = None,
                fingerprint: Optional[str] = None) -> ReportEnvironment:
    """What the trials ran on: interpreter and versions (as the child saw them when it ran)."""
    seen = next((r.versions for r in records if r.versions.get("vllm")), {})
    return ReportEnvironment(
        python=interpreter.python, python_version=seen.get("python") or interpreter.python_version,
        vllm_version=seen.get("vllm") or interpreter.vllm_version, vllm_distribution=interpreter.vllm_distribution,
        torch_version=seen.get("torch") or interpreter.torch_version, cuda_version=seen.get("cuda"),
        preflight=preflight, fingerprint=fingerprint)


def build_report(search: Mapping[str, Any], result: StudyResult, env: ReportEnvironment, wall_time_s: float,
                 fingerprint_inputs: Mapping[str, Any], resumed_trials: int) -> SearchReport:
    """The report of a search that ran now (diagnosis and alternatives are added by their own steps)."""
    total = env.preflight.total_bytes if env.preflight is not None else None
    return SearchReport(
        tool_version=__version__, created=now_iso(), search=SearchSettings.from_json(search),
        fit=fit_summary(result.fit, total) if result.fit else None, stop=result.stop,
        stop_reason=result.stop_detail, proven=result.proven, notes=tuple(result.notes), launches=result.launches,
        wall_time_s=round(wall_time_s, 2), trials=tuple(result.records), environment=env,
        fingerprint_inputs=dict(fingerprint_inputs), cache=CacheInfo(hit=False, resumed_trials=resumed_trials))


def search_settings(prepared: Prepared) -> Dict[str, Any]:
    """The search's settings as the report records them: every option that applies, then what prepare decided."""
    request, kind = prepared.request, prepared.objective
    summary: Dict[str, Any] = {"objective": kind.value}
    summary.update(applied_options(request, kind, [name for name in OPTIONS if name != "python"]))
    summary["engine_args"] = public_args(request.engine_args)  # the report is shared: no secret values
    summary.update({"min_len": prepared.space.min_len, "max_len": prepared.space.max_len,
                    "granularity": prepared.space.granularity, "utilization_cap": prepared.utilization_cap,
                    "autofit_first": prepared.use_autofit, "model_derived_max_len": prepared.model.derived_max_len})
    return summary


def report_of_study(prepared: Prepared, result: StudyResult, fingerprint: str, inputs: Mapping[str, Any],
                    resumed_trials: int, wall_time_s: float) -> SearchReport:
    """The report of a search that ran now, with its diagnosis when the fit is short or there is none."""
    preflight = prepared.devices.preflight
    report = build_report(search_settings(prepared), result,
                          environment(prepared.interpreter, result.records, preflight, fingerprint), wall_time_s,
                          inputs, resumed_trials)
    diagnosis = diagnose(report, prepared.model, prepared.request.tensor_parallel_size, prepared.utilization_cap,
                         preflight.total_bytes)
    return dataclasses.replace(report, diagnosis=diagnosis) if diagnosis is not None else report
