"""The words of a result: a trial's outcome, where memory ran out, the facts read from vLLM, why a search stopped."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional

from .logs.regime import Engine


class Outcome(str, Enum):
    """What one trial proved. Exactly one per trial."""

    OK = "ok"
    """Started, and the full-length verification request succeeded."""
    KV_TOO_SMALL = "kv_too_small"
    """The KV cache cannot hold one sequence of max_model_len tokens."""
    NO_KV_MEMORY = "no_kv_memory"
    """No memory at all was left for the KV cache."""
    FREE_MEMORY_SHORT = "free_memory_short"
    """Something else holds the device memory this trial asked for."""
    OOM = "oom"
    """Out of memory at load, profiling, KV allocation, graph capture or during the request."""
    TOO_LONG_FOR_MODEL = "too_long_for_model"
    """max_model_len is over the model's derived maximum."""
    REQUEST_FAILED = "request_failed"
    """Started, but the full-length request hung or was not served in full (a length verdict)."""
    BAD_CONFIG = "bad_config"
    """vLLM refused the configuration itself (not a memory question)."""
    TIMEOUT = "timeout"
    """The trial did not finish starting within the trial timeout."""
    ENVIRONMENT = "environment"
    """The environment, not the config, is wrong: vLLM does not import, or there is no device."""
    CRASH = "crash"
    """Nothing recognised (also: an unexplained error during the request); the log tail is kept."""


class OomStage(str, Enum):
    """Where an out-of-memory error happened; it decides what the error proves."""

    LOAD = "load"
    """Loading the weights: no utilization helps (the weights do not fit the device)."""
    PROFILE = "profile"
    """The profiling run, before the KV cache is sized."""
    KV_ALLOCATION = "kv_allocation"
    """Allocating the KV cache, capturing CUDA graphs or warming up: the utilization is too high."""
    REQUEST = "request"
    """Serving the full-length request: the utilization leaves too little headroom."""


@dataclass
class CapacityFacts:
    """Numbers vLLM printed (or the probe read from the engine) about memory and KV capacity.

    Every field is optional: each vLLM version prints a different subset. Sizes in GiB are as
    vLLM printed them (two decimals, or a rounded float from 0.14).
    """

    kv_cache_tokens: Optional[int] = None
    """Tokens of KV cache as logged ("KV cache size: N tokens", or blocks x block size)."""
    max_concurrency: Optional[float] = None
    concurrency_len: Optional[int] = None
    num_blocks: Optional[int] = None
    block_size: Optional[int] = None
    available_kv_gib: Optional[float] = None
    """KV cache memory as logged (V1 "Available KV cache memory", V0 profile, CPU "set (x/y) GiB")."""
    kv_cache_bytes: Optional[int] = None
    """KV cache memory in exact bytes, where vLLM printed them (0.10.2's "in use is N bytes")."""
    total_memory_gib: Optional[float] = None
    requested_memory_gib: Optional[float] = None
    gpu_memory_utilization: Optional[float] = None
    kv_cache_memory_bytes: Optional[int] = None
    effective_max_model_len: Optional[int] = None
    autofit_len: Optional[int] = None
    autofit_from: Optional[int] = None
    """The max_model_len the engine was configured with when auto-fit sized the pool (the model's maximum)."""
    autofit_reduced: Optional[bool] = None
    """True when vLLM said it reduced the length to fit memory; False when the full context fit."""
    estimated_max_len: Optional[int] = None
    """From a too-long error: vLLM's estimate of the longest max_model_len that fits."""
    error_capacity_tokens: Optional[int] = None
    """From an old-style too-long error: the tokens the KV cache can store."""
    error_max_model_len: Optional[int] = None
    """From a too-long error: the max_model_len the engine was checking."""
    needed_kv_gib: Optional[float] = None
    error_available_kv_gib: Optional[float] = None
    derived_max_len: Optional[int] = None
    free_memory_gib: Optional[float] = None
    oom_alloc_bytes: Optional[int] = None
    """From an out-of-memory error: the allocation that failed ("Tried to allocate ...")."""
    oom_free_bytes: Optional[int] = None
    """From an out-of-memory error: what the device still had free at that moment."""
    oom_stage: Optional[OomStage] = None
    weights_gib: Optional[float] = None
    activation_gib: Optional[float] = None
    non_torch_gib: Optional[float] = None
    cudagraph_gib: Optional[float] = None
    max_num_batched_tokens: Optional[int] = None
    """The scheduler's token budget per step, as logged ("Chunked prefill is enabled with ...")."""
    in_flight_tokens: Optional[int] = None
    """Tokens scheduled but not settled (max_num_batched_tokens, twice with async scheduling), where the
    probe read vLLM's own figure."""
    engine_version: Optional[str] = None
    engine: Optional[Engine] = None
    """V0 or V1, from the engine banner or a V0 fallback warning."""

    def as_dict(self) -> Dict[str, Any]:
        """The fields that are set, for reports (enums as their values)."""
        return {key: (value.value if isinstance(value, Enum) else value)
                for key, value in asdict(self).items() if value is not None}

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> CapacityFacts:
        """Rebuild from as_dict (unknown keys are refused by the caller's schema check)."""
        values = dict(data)
        if values.get("oom_stage") is not None:
            values["oom_stage"] = OomStage(values["oom_stage"])
        if values.get("engine") is not None:
            values["engine"] = Engine(values["engine"])
        return cls(**values)


@dataclass
class Classification:
    """The outcome of one trial with the facts and the log lines that decided it."""

    outcome: Outcome
    detail: str
    facts: CapacityFacts = field(default_factory=CapacityFacts)
    evidence: List[str] = field(default_factory=list)
    phase: Optional[str] = None
    """Where it ended: import, start, request (from the probe), or the last phase seen in the log."""
    transient: bool = False
    """vLLM or the system reported the failure as non-deterministic (NCCL hiccup, port in use ...)."""


class StopReason(str, Enum):
    """Why a study stopped. COMPLETE and NOTHING_FITS are proofs; the others leave the answer open."""

    COMPLETE = "complete"
    NOTHING_FITS = "nothing_fits"
    STOPPING_OUTCOME = "stopping_outcome"
    TIMEOUTS = "timeouts"
    TRIAL_LIMIT = "trial_limit"
    INTERRUPTED = "interrupted"
    """Ctrl-C or SIGTERM: the finished trials are kept (report, journal); the caller exits 130."""

    @property
    def proven(self) -> bool:
        return self in (StopReason.COMPLETE, StopReason.NOTHING_FITS)
