"""One trial end to end: run the probe, classify what happened, keep the evidence as a record."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional

from . import capacity, runner
from .classify import classify
from .outcome import CapacityFacts, Outcome
from .redact import public_args, scrub
from .search.base import AUTO, Observation

GIB = 1 << 30


@dataclass
class TrialRecord:
    """Everything one trial proved, as kept in the report and the journal."""

    index: int
    llm_kwargs: Dict[str, Any]
    outcome: Outcome
    detail: str
    duration_s: float
    length: Optional[int]
    """The max_model_len the engine ran with (for auto-fit: the one vLLM chose)."""
    hint: Optional[int]
    facts: CapacityFacts
    evidence: List[str]
    phase: Optional[str] = None
    exit_code: Optional[int] = None
    versions: Dict[str, Any] = field(default_factory=dict)
    request: Optional[Dict[str, Any]] = None
    log: str = ""
    retries: List[Dict[str, Any]] = field(default_factory=list)
    """Earlier attempts of the same candidate that failed transiently (outcome, detail, duration)."""
    device: Dict[str, Any] = field(default_factory=dict)
    """Device memory around the trial: the wait for the previous trial's release, the peak used."""

    @property
    def requested_len(self) -> int:
        return int(self.llm_kwargs["max_model_len"])

    @property
    def memory(self) -> Optional[float]:
        """The memory knob of this trial: KV bytes when set, else the utilization (None: default)."""
        if self.llm_kwargs.get("kv_cache_memory_bytes") is not None:
            return float(self.llm_kwargs["kv_cache_memory_bytes"])
        value = self.llm_kwargs.get("gpu_memory_utilization")
        return float(value) if value is not None else None

    def observation(self) -> Observation:
        """The record as the search sees it."""
        facts = self.facts
        derived = facts.derived_max_len if self.outcome is Outcome.TOO_LONG_FOR_MODEL else None
        shortfall = None
        if self.outcome is Outcome.OOM and facts.oom_alloc_bytes is not None:
            shortfall = facts.oom_alloc_bytes - (facts.oom_free_bytes or 0)
        free_fraction = None
        if self.outcome is Outcome.FREE_MEMORY_SHORT and facts.free_memory_gib and facts.total_memory_gib:
            free_fraction = facts.free_memory_gib / facts.total_memory_gib
        return Observation(
            requested=self.requested_len, length=self.length, outcome=self.outcome, hint=self.hint,
            derived_max=derived, memory=self.memory, blocks=facts.num_blocks, block_size=facts.block_size,
            kv_bytes=facts.available_kv_gib * GIB if facts.available_kv_gib is not None else None,
            total_bytes=facts.total_memory_gib * GIB if facts.total_memory_gib else None,
            oom_shortfall_bytes=shortfall, free_fraction=free_fraction)

    def to_json(self) -> Dict[str, Any]:
        """The record for the JSON report and the journal (secrets already removed)."""
        return {
            "index": self.index,
            "engine_args": public_args(self.llm_kwargs),
            "outcome": self.outcome.value,
            "detail": self.detail,
            "duration_s": self.duration_s,
            "max_model_len": self.length,
            "max_len_hint": self.hint,
            "capacity": self.facts.as_dict(),
            "evidence": self.evidence,
            "phase": self.phase,
            "exit_code": self.exit_code,
            "versions": self.versions,
            "request": self.request,
            "retries": self.retries,
            "device": self.device,
            "log": self.log,
        }

    @classmethod
    def from_json(cls, data: Dict[str, Any]) -> "TrialRecord":
        """Rebuild a record written by to_json (for the journal and the cache)."""
        return cls(
            index=data["index"], llm_kwargs=dict(data["engine_args"]), outcome=Outcome(data["outcome"]),
            detail=data["detail"], duration_s=data["duration_s"], length=data["max_model_len"],
            hint=data["max_len_hint"], facts=CapacityFacts(**data["capacity"]),
            evidence=list(data["evidence"]), phase=data.get("phase"), exit_code=data.get("exit_code"),
            versions=dict(data.get("versions") or {}), request=data.get("request"),
            log=data.get("log", ""), retries=list(data.get("retries") or []),
            device=dict(data.get("device") or {}),
        )


def _effective_length(llm_kwargs: Mapping[str, Any], facts: CapacityFacts,
                      result: Mapping[str, Any]) -> Optional[int]:
    """The length the engine ran with: for auto-fit, what the engine (or its auto-fit line) says."""
    requested = int(llm_kwargs["max_model_len"])
    if requested != AUTO:
        return requested
    engine_len = (result.get("engine") or {}).get("max_model_len")
    return engine_len if isinstance(engine_len, int) and engine_len > 0 else facts.autofit_len


def run_trial(
    index: int,
    python: str,
    llm_kwargs: Dict[str, Any],
    work_dir: Path,
    *,
    timeout_s: float,
    env: Mapping[str, str],
    on_phase: Callable[[str], None] = lambda phase: None,
    plain_attention: bool = True,
) -> TrialRecord:
    """Launch one candidate and return what it proved.

    plain_attention: the model is full attention only, so block counts translate into lengths.
    """
    run = runner.run_probe(python, {"llm_kwargs": llm_kwargs}, work_dir, timeout_s=timeout_s,
                           env=env, on_phase=on_phase)
    return record_from_run(index, llm_kwargs, run, env, plain_attention)


def record_from_run(index: int, llm_kwargs: Dict[str, Any], run: runner.TrialRun, env: Mapping[str, str],
                    plain_attention: bool = True) -> TrialRecord:
    """Classify a finished probe run and keep it as a record (secrets scrubbed)."""
    verdict = classify(run.log_text, run.result, timed_out=run.timed_out, exit_code=run.exit_code,
                       last_phase=run.probe_phase)
    if run.survivors:
        verdict.evidence.append("processes still alive after cleanup: %s" % run.survivors)
    result = run.result or {}
    versions = result.get("versions") or {}
    length = _effective_length(llm_kwargs, verdict.facts, result)
    return TrialRecord(
        index=index, llm_kwargs=dict(llm_kwargs), outcome=verdict.outcome,
        detail=scrub(verdict.detail, env), duration_s=run.duration_s, length=length,
        hint=capacity.max_len_hint(verdict, length, versions.get("vllm") or verdict.facts.engine_version,
                                   plain_attention),
        facts=verdict.facts, evidence=[scrub(line, env) for line in verdict.evidence],
        phase=verdict.phase, exit_code=run.exit_code, versions=versions,
        request=result.get("request"), log=scrub(run.log_text, env),
    )
