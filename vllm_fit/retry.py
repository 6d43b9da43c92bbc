"""Retries of transient trial failures, with backoff and a small bound (tenacity).

Transient: free device memory short at start-up (often a previous trial's memory not yet released,
or another job's burst), and crashes that vLLM or the system reports as non-deterministic (NCCL
hiccups, a port in use). Deterministic outcomes (too long for the KV cache, over the model's
maximum, bad config, OOM) are never retried: the same launch would prove the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List

from tenacity import Retrying, retry_if_result, stop_after_attempt, wait_exponential

from .classify import is_nondeterministic
from .outcome import Classification, Outcome
from .trial import TrialRecord


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently to retry a transient failure."""

    attempts: int = 3
    """Launches per candidate at most (the first one included)."""
    wait_s: float = 5.0
    """Backoff before the first retry; it doubles for each further one."""
    max_wait_s: float = 60.0


def is_transient(record: TrialRecord) -> bool:
    """True for outcomes worth launching the same candidate again."""
    if record.outcome is Outcome.FREE_MEMORY_SHORT:
        return True
    verdict = Classification(record.outcome, record.detail, record.facts, record.evidence)
    return is_nondeterministic(verdict, record.log)


def run_with_retries(attempt: Callable[[], TrialRecord], policy: RetryPolicy,
                     before_retry: Callable[[], None] = lambda: None) -> TrialRecord:
    """Run `attempt` until it is not transient or the policy's bound is reached.

    The returned record is the last attempt's; the earlier ones are kept in its `retries`.
    """
    failed: List[TrialRecord] = []

    def remember(state) -> None:
        failed.append(state.outcome.result())
        before_retry()

    retrying = Retrying(
        stop=stop_after_attempt(policy.attempts),
        wait=wait_exponential(multiplier=policy.wait_s, min=policy.wait_s, max=policy.max_wait_s),
        retry=retry_if_result(is_transient),
        retry_error_callback=lambda state: state.outcome.result(),
        before_sleep=remember,
    )
    record = retrying(attempt)
    record.retries = [{"outcome": r.outcome.value, "detail": r.detail, "duration_s": r.duration_s,
                       "evidence": r.evidence[-5:]} for r in failed]
    return record
