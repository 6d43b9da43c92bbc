"""What one trial proved, built once and complete: outcome, facts, evidence, the hint for the search.

A record never holds a secret: its engine arguments are the public ones (secret values are `***`),
and its texts were scrubbed when the run was read. It is what the journal, the cache and the report
keep; `from_json` refuses what it does not understand rather than replaying it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from ..logs.capacity import hint_is_exact, layouts_unexplained, max_len_hint, pool_blocks, request_blocks
from ..logs.classify import classify
from ..logs.probe_result import ProbeResult
from ..logs.regime import Engine, Regime, default_engine, version_tuple
from ..outcome import CapacityFacts, Classification, Outcome
from ..redact import public_args
from ..strategies.base import AUTO, Observation
from .context import TrialContext
from .runner import ProcessRun

GIB = 1 << 30


@dataclass(frozen=True)
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
    evidence: Tuple[str, ...]
    phase: Optional[str] = None
    exit_code: Optional[int] = None
    versions: Dict[str, Any] = field(default_factory=dict)
    request: Optional[Dict[str, Any]] = None
    log: str = ""
    retries: Tuple[Dict[str, Any], ...] = ()
    """Earlier attempts of the same candidate that failed transiently (outcome, detail, duration)."""
    device: Dict[str, Any] = field(default_factory=dict)
    """Device memory around the trial: the wait for the previous trial's release, the peak used."""
    transient: bool = False
    """vLLM or the system called the failure non-deterministic (it may be retried)."""
    timeout_s: Optional[float] = None
    """The trial timeout it ran under (a timeout proves something only up to this)."""
    concurrency: Optional[Dict[str, Any]] = None
    """With --concurrency N: the sequences the pool holds at once (vLLM's numbers), the requests
    sent together and, served, the most seen running at once."""
    load_format: Optional[str] = None
    """"dummy" when the trial ran on dummy weights (exploration only)."""
    hint_exact: bool = False
    """The hint is the pool's own limit: one token more does not start or serve with this pool."""
    hint_from_layout: bool = False
    """The hint was read off the KV cache groups the tool foresaw (a model that is not plain attention),
    not off vLLM's own estimate or auto-fit."""
    layouts_unexplained: bool = False
    """The trial printed its pool's figures and no foreseen KV cache layout reproduces them: lengths read
    off those layouts at this memory are in doubt."""
    kv_from_environment: bool = False
    """The CPU backend sized the pool from VLLM_CPU_KVCACHE_SPACE (before 0.20): the same at every length."""

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

    @property
    def regime(self) -> Regime:
        """The rules of the version and engine this trial ran (as far as it said)."""
        engine = self.engine
        return Regime.of(self.versions.get("vllm") or self.facts.engine_version, engine)

    @property
    def engine(self) -> Optional[Engine]:
        return self.facts.engine

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
        kv_bytes = float(facts.kv_cache_bytes) if facts.kv_cache_bytes is not None else (
            facts.available_kv_gib * GIB if facts.available_kv_gib is not None else None)
        if kv_bytes is None and self.outcome is Outcome.KV_TOO_SMALL and facts.error_available_kv_gib:
            kv_bytes = facts.error_available_kv_gib * GIB  # the pool a too-long start had: a point on the line
        kv_set = self.llm_kwargs.get("kv_cache_memory_bytes") is not None
        if kv_set and self.outcome is not Outcome.KV_TOO_SMALL:
            kv_bytes = float(self.llm_kwargs["kv_cache_memory_bytes"])
        kv_fixed = kv_set or self.kv_from_environment
        return Observation(
            requested=self.requested_len, length=self.length, outcome=self.outcome, hint=self.hint,
            derived_max=derived, memory=self.memory, blocks=facts.num_blocks, block_size=facts.block_size,
            kv_bytes=kv_bytes, total_bytes=facts.total_memory_gib * GIB if facts.total_memory_gib else None,
            oom_shortfall_bytes=shortfall, oom_stage=facts.oom_stage, free_fraction=free_fraction,
            transient=self.transient, engine=self.engine, autofit_reduced=facts.autofit_reduced,
            pool_at=facts.autofit_from if self.requested_len == AUTO else None,
            request_blocks=request_blocks(facts, self.regime) if self.length and facts.concurrency_len == self.length
            else None,
            held=facts.max_concurrency if self.length and facts.concurrency_len == self.length else None,
            fixed_pool_bound=self.hint if self.hint_exact and self.hint is not None and kv_fixed else None,
            kv_fixed=kv_fixed, hint_from_layout=self.hint_from_layout, layouts_unexplained=self.layouts_unexplained)

    def to_json(self) -> Dict[str, Any]:
        """The record for the JSON report and the journal (secrets already removed)."""
        return {
            "index": self.index,
            "engine_args": dict(self.llm_kwargs),
            "outcome": self.outcome.value,
            "detail": self.detail,
            "duration_s": self.duration_s,
            "max_model_len": self.length,
            "max_len_hint": self.hint,
            "capacity": self.facts.as_dict(),
            "evidence": list(self.evidence),
            "phase": self.phase,
            "exit_code": self.exit_code,
            "versions": self.versions,
            "request": self.request,
            "concurrency": self.concurrency,
            "retries": list(self.retries),
            "device": self.device,
            "transient": self.transient,
            "timeout_s": self.timeout_s,
            "load_format": self.load_format,
            "max_len_hint_exact": self.hint_exact,
            # only where true: a model laid out in KV cache groups (reports of plain models keep their keys)
            **({"max_len_hint_from_layout": True} if self.hint_from_layout else {}),
            **({"layouts_unexplained": True} if self.layouts_unexplained else {}),
            **({"kv_from_environment": True} if self.kv_from_environment else {}),
            "log": self.log,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TrialRecord:
        """Rebuild a record written by to_json; ValueError (with the reason) for anything else."""
        try:
            return cls(
                index=int(data["index"]), llm_kwargs=dict(data["engine_args"]), outcome=Outcome(data["outcome"]),
                detail=str(data["detail"]), duration_s=float(data["duration_s"]), length=data["max_model_len"],
                hint=data["max_len_hint"], facts=CapacityFacts.from_dict(data["capacity"]),
                evidence=tuple(data["evidence"]), phase=data.get("phase"), exit_code=data.get("exit_code"),
                versions=dict(data.get("versions") or {}), request=data.get("request"),
                concurrency=data.get("concurrency"),
                log=str(data.get("log", "")), retries=tuple(data.get("retries") or ()),
                device=dict(data.get("device") or {}), transient=bool(data.get("transient")),
                timeout_s=data.get("timeout_s"), load_format=data.get("load_format"),
                hint_exact=bool(data.get("max_len_hint_exact")),
                hint_from_layout=bool(data.get("max_len_hint_from_layout")),
                layouts_unexplained=bool(data.get("layouts_unexplained")),
                kv_from_environment=bool(data.get("kv_from_environment")),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError("not a trial record (%s: %s)" % (type(exc).__name__, exc)) from None


def effective_length(llm_kwargs: Mapping[str, Any], facts: CapacityFacts,
                     result: Optional[ProbeResult]) -> Optional[int]:
    """The length the engine ran with: for auto-fit, what the engine (or its auto-fit line) says."""
    requested = int(llm_kwargs["max_model_len"])
    if requested != AUTO:
        return requested
    engine_len = result.engine.get("max_model_len") if result is not None else None
    if isinstance(engine_len, int) and engine_len > 0:
        return engine_len
    return facts.autofit_len


def regime_of(facts: CapacityFacts, versions: Mapping[str, Any], context: TrialContext) -> Regime:
    """The rules this trial ran under: the version the child reported, the engine its log named."""
    version = versions.get("vllm") or facts.engine_version or context.vllm_version
    engine = facts.engine
    return Regime.of(version, engine, kv_bytes_fixed=context.kv_bytes_fixed, cpu=context.cpu,
                     whole_prompt_admission=context.whole_prompt_admission)


def hint_of(verdict: Classification, versions: Mapping[str, Any], context: TrialContext) -> Optional[int]:
    """The trial's hint in the rules of the version that ran it."""
    regime = regime_of(verdict.facts, versions, context)
    return max_len_hint(verdict.outcome, verdict.facts, regime, context.guess_block_size, context.plain_attention,
                        context.sliding_window, context.sequences, context.layouts)


def hint_exact_of(verdict: Classification, versions: Mapping[str, Any], context: TrialContext) -> bool:
    """Whether the trial's hint is its pool's own limit (see `hint_is_exact`); never with --concurrency."""
    if context.sequences > 1:
        return False
    regime = regime_of(verdict.facts, versions, context)
    return hint_is_exact(verdict.outcome, verdict.facts, regime, context.plain_attention, context.layouts)


def layout_reading_of(verdict: Classification, versions: Mapping[str, Any], context: TrialContext
                      ) -> Tuple[bool, bool]:
    """Whether the trial's hint was read off the foreseen KV cache groups, and whether its printed pool
    figures match none of them (see `layouts_unexplained`)."""
    if context.plain_attention or not context.layouts or verdict.outcome is Outcome.KV_TOO_SMALL:
        return False, False
    facts = verdict.facts
    regime = regime_of(facts, versions, context)
    size = facts.block_size or context.guess_block_size
    own = facts.autofit_len is not None and bool(facts.autofit_reduced)  # vLLM's own auto-fit length
    return not own, layouts_unexplained(facts, regime, size, context.layouts)


def concurrency_verdict(verdict: Classification, length: Optional[int], result: Optional[ProbeResult],
                        versions: Mapping[str, Any], context: TrialContext) -> Tuple[Classification, Dict[str, Any]]:
    """A served trial holds N sequences at once only when vLLM's numbers say its pool holds them
    (all N finishing proves nothing alone: vLLM may run them one after the other)."""
    facts, wanted = verdict.facts, context.sequences
    request = (result.request if result is not None else None) or {}
    regime = regime_of(facts, versions, context)
    size = facts.block_size or context.guess_block_size
    blocks = pool_blocks(facts, regime, size)
    held = regime.sequences_held(blocks, size, length) if blocks and length and context.plain_attention else None
    seen = request.get("peak_running")
    found = {"requested": wanted, "sent": request.get("sequences"), "held_by_pool": held, "peak_running": seen,
             "vllm_ratio": facts.max_concurrency}
    if verdict.outcome is not Outcome.OK:
        return verdict, found
    if held is not None and held < wanted:
        detail = "the KV pool (%d blocks of %d) holds %d full-length sequences of %d at once, not %d" % (
            blocks or 0, size, held, length or 0, wanted)
    elif held is None and (seen is None or seen < wanted):
        detail = "no proof that %d sequences ran at once (block counts unknown%s)" % (
            wanted, "" if seen is None else "; at most %d seen running" % seen)
    else:
        return verdict, found
    return Classification(Outcome.REQUEST_FAILED, detail, facts, [*verdict.evidence, detail], verdict.phase), found


def record_from_run(index: int, llm_kwargs: Mapping[str, Any], run: ProcessRun, context: TrialContext,
                    timeout_s: Optional[float] = None) -> TrialRecord:
    """Classify a finished probe run and keep it as a record (the run's texts are already scrubbed)."""
    verdict = classify(run.log_text, run.result, timed_out=run.timed_out, exit_code=run.exit_code,
                       last_phase=run.probe_phase, interpreter=context.interpreter)
    result = run.result
    versions = dict(result.versions) if result is not None else {}
    if verdict.facts.engine is None and verdict.facts.engine_version is not None:
        # the banner named no engine (before 0.7.1): the version's default, or V1 where VLLM_USE_V1=1 chose it
        use = versions.get("VLLM_USE_V1")
        verdict.facts.engine = default_engine(version_tuple(versions.get("vllm") or verdict.facts.engine_version),
                                              {"VLLM_USE_V1": use} if isinstance(use, str) else {})
    length = effective_length(llm_kwargs, verdict.facts, result)
    concurrency = None
    if context.sequences > 1:
        verdict, concurrency = concurrency_verdict(verdict, length, result, versions, context)
    evidence = list(verdict.evidence)
    if run.survivors:
        evidence.append("processes still alive after cleanup: %s" % run.survivors)
    from_layout, unexplained = layout_reading_of(verdict, versions, context)
    hint = hint_of(verdict, versions, context)
    return TrialRecord(
        index=index, llm_kwargs=public_args(llm_kwargs), outcome=verdict.outcome, detail=verdict.detail,
        duration_s=run.duration_s, length=length, hint=hint, hint_exact=hint_exact_of(verdict, versions, context),
        hint_from_layout=from_layout and hint is not None, layouts_unexplained=unexplained,
        kv_from_environment=regime_of(verdict.facts, versions, context).kv_from_environment,
        facts=verdict.facts, evidence=tuple(evidence),
        phase=verdict.phase, exit_code=run.exit_code, versions=versions,
        request=dict(result.request) if result is not None and result.request is not None else None,
        log=run.log_text, transient=verdict.transient, timeout_s=timeout_s,
        load_format=llm_kwargs.get("load_format") if isinstance(llm_kwargs.get("load_format"), str) else None,
        concurrency=concurrency,
    )
