"""Trials on the simulated GPU without processes: the fake's accounting rendered as vLLM output and
fed through the real classifier. TEST DOUBLE for GPU memory semantics (see tests/fakes/fakegpu.py)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import fakegpu

from vllm_fit.logs.probe_result import ProbeResult
from vllm_fit.search.base import Candidate, Observation
from vllm_fit.trial.record import TrialContext, TrialRecord, record_from_run
from vllm_fit.trial.runner import ProcessRun


def _context(spec: Dict[str, Any]) -> TrialContext:
    return TrialContext(spec.get("version", "0.32.0"), spec.get("block_size", 16))


def launch(spec: Dict[str, Any], candidate: Candidate, others_bytes: float = 0.0, index: int = 1) -> TrialRecord:
    """What one trial of `candidate` would prove on the simulated device."""
    kwargs = dict(model="m", tensor_parallel_size=1, **candidate.engine_args())
    versions = {"vllm": spec.get("version", "0.32.0")}
    try:
        plan = fakegpu.plan_engine(spec, candidate.max_model_len, candidate.gpu_memory_utilization,
                                   candidate.kv_cache_memory_bytes, others_bytes)
    except fakegpu.EngineError as error:
        kind, message = fakegpu.render_error(error)
        result = {"status": "start_failed", "phase": "start", "versions": versions,
                  "exception": {"type": "builtins." + kind, "message": message}}
        run = ProcessRun([], "", ProbeResult.parse(result), 1, False, 0.0, "start")
        return record_from_run(index, kwargs, run, _context(spec))
    text = "\n".join(fakegpu.log_line("INFO", line)
                     for line in fakegpu.start_log(plan, others_bytes, candidate.kv_cache_memory_bytes is not None))
    engine = {"num_gpu_blocks": plan["num_blocks"], "block_size": plan["block_size"],
              "max_model_len": plan["max_model_len"], "gpu_memory_utilization": plan["util"]}
    if plan["request_ok"]:
        result = {"status": "ok", "phase": "request", "versions": versions, "engine": engine,
                  "request": {"total_tokens": plan["max_model_len"]}}
    else:
        text += "\n##vllm-fit phase=request\n"
        result = {"status": "request_failed", "phase": "request", "versions": versions, "engine": engine,
                  "exception": {"type": "torch.OutOfMemoryError", "message": fakegpu.request_oom_message(plan)}}
    return record_from_run(index, kwargs, ProcessRun([], text, ProbeResult.parse(result), 1, False, 0.0, "request"),
                           _context(spec))


def run_objective(objective, spec: Dict[str, Any], others_bytes: float = 0.0, limit: int = 60):
    """Drive an objective to the end; return (fit record or None, all records)."""
    records: List[TrialRecord] = []
    for _ in range(limit):
        history: List[Observation] = [r.observation() for r in records]
        candidate: Optional[Candidate] = objective.propose(history)
        if candidate is None:
            index = objective.fit(history)
            return (records[index] if index is not None else None), records
        records.append(launch(spec, candidate, others_bytes, len(records) + 1))
    raise AssertionError("objective did not stop: %s" % [r.llm_kwargs for r in records])
