"""The words of a trial's result: the outcome enum and the capacity facts read from vLLM's output."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any, Dict, List, Optional


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
    """Out of memory at load, profiling, graph capture or during the request."""
    TOO_LONG_FOR_MODEL = "too_long_for_model"
    """max_model_len is over the model's derived maximum."""
    REQUEST_FAILED = "request_failed"
    """Started, but the verification request failed or hung."""
    BAD_CONFIG = "bad_config"
    """vLLM refused the configuration itself (not a memory question)."""
    TIMEOUT = "timeout"
    """The trial did not finish starting within the trial timeout."""
    ENVIRONMENT = "environment"
    """The child could not import vLLM: the environment, not the config, is wrong."""
    CRASH = "crash"
    """Nothing recognised; the log tail is kept as evidence."""


@dataclass
class CapacityFacts:
    """Numbers vLLM printed (or the probe read from the engine) about memory and KV capacity.

    Every field is optional: each vLLM version prints a different subset.
    """

    kv_cache_tokens: Optional[int] = None
    """Tokens of KV cache as logged ("KV cache size: N tokens", or blocks x block size)."""
    max_concurrency: Optional[float] = None
    concurrency_len: Optional[int] = None
    num_blocks: Optional[int] = None
    block_size: Optional[int] = None
    available_kv_gib: Optional[float] = None
    """KV cache memory as logged (V1 "Available KV cache memory", V0 profile, CPU "set (x/y) GiB")."""
    total_memory_gib: Optional[float] = None
    requested_memory_gib: Optional[float] = None
    gpu_memory_utilization: Optional[float] = None
    kv_cache_memory_bytes: Optional[int] = None
    effective_max_model_len: Optional[int] = None
    autofit_len: Optional[int] = None
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
    engine_version: Optional[str] = None

    def as_dict(self) -> Dict[str, Any]:
        """The fields that are set, for reports."""
        return {key: value for key, value in asdict(self).items() if value is not None}


@dataclass
class Classification:
    """The outcome of one trial with the facts and the log lines that decided it."""

    outcome: Outcome
    detail: str
    facts: CapacityFacts = field(default_factory=CapacityFacts)
    evidence: List[str] = field(default_factory=list)
    phase: Optional[str] = None
    """Where it ended: import, start, request (from the probe), or the last phase seen in the log."""
