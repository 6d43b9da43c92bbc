"""Retries of transient trial failures, with backoff and a small bound (tenacity).

Transient: free device memory short at start-up (often a previous trial's memory not yet released,
or another job's burst), and failures that vLLM or the system reports as non-deterministic (NCCL
hiccups, a port in use). Deterministic outcomes (too long for the KV cache, over the model's
maximum, bad config, OOM) are never retried: the same launch would prove the same thing.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, List

from tenacity import Retrying, retry_if_result, stop_after_attempt, wait_exponential

from ..outcome import Outcome
from .record import TrialRecord


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry a transient failure."""

    attempts: int = 3
    """Launches per candidate at most (the first one included)."""
    wait_s: float = 5.0
    """Backoff before the first retry; it doubles for each further one."""
    max_wait_s: float = 60.0


def is_transient(record: TrialRecord) -> bool:
    """True for outcomes worth launching the same candidate again (a flaky start, not a verdict).

    A free-memory shortfall is one only when nobody saw the previous trial's memory released (no
    NVML to watch): where the launch waited for the release, the shortfall vLLM prints is the
    device's state, and the search moves below it instead.
    """
    if record.outcome is Outcome.FREE_MEMORY_SHORT:
        return (record.device or {}).get("released") is not True
    return record.transient and record.outcome is not Outcome.OK


def run_with_retries(attempt: Callable[[], TrialRecord], policy: RetryPolicy) -> TrialRecord:
    """Run `attempt` until it is not transient or the policy's bound is reached.

    The returned record is the last attempt's, with the earlier ones summarised in its `retries`.
    """
    failed: List[TrialRecord] = []

    def _last_result(state: Any) -> TrialRecord:
        return state.outcome.result()

    def remember(state: Any) -> None:
        failed.append(state.outcome.result())

    retrying = Retrying(
        stop=stop_after_attempt(policy.attempts),
        wait=wait_exponential(multiplier=policy.wait_s, min=policy.wait_s, max=policy.max_wait_s),
        retry=retry_if_result(is_transient),
        retry_error_callback=_last_result,
        before_sleep=remember,
    )
    record = retrying(attempt)
    earlier = tuple({"outcome": r.outcome.value, "detail": r.detail, "duration_s": r.duration_s,
                     "evidence": list(r.evidence[-5:])} for r in failed)
    return dataclasses.replace(record, retries=earlier)
