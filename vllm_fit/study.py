"""The ask-and-tell loop: the objective proposes, a trial runs, the record is told back.

The loop owns no search logic and no process logic; it connects the objective (pure), the trial
runner (side effects) and the listener (the terminal view), and decides when to stop.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional

from .gpu import Devices
from .outcome import Outcome
from .retry import RetryPolicy, run_with_retries
from .search.base import Candidate
from .search.objectives import Objective
from .trial import TrialRecord, run_trial

STOPPING_OUTCOMES = frozenset({Outcome.BAD_CONFIG, Outcome.CRASH, Outcome.TIMEOUT,
                               Outcome.ENVIRONMENT, Outcome.FREE_MEMORY_SHORT})
"""Outcomes that say nothing about the candidate's length or memory: searching on is pointless."""
MAX_TRIALS = 64


@dataclass(frozen=True)
class TrialPlan:
    """What every trial of one search shares."""

    python: str
    model: str
    tensor_parallel_size: int
    engine_args: Mapping[str, Any]
    timeout_s: float
    env: Mapping[str, str]
    work_dir: Path
    plain_attention: bool = True
    """The model is full attention only (block counts translate into lengths)."""
    devices: Optional[Devices] = None
    """NVML view of the devices: wait for memory release between trials, sample peaks."""
    retry: RetryPolicy = RetryPolicy()

    def llm_kwargs(self, candidate: Candidate) -> Dict[str, Any]:
        """LLM(...) keyword arguments for one candidate."""
        kwargs: Dict[str, Any] = {"model": self.model, "tensor_parallel_size": self.tensor_parallel_size}
        kwargs.update(self.engine_args)
        kwargs.update(candidate.engine_args())
        return kwargs


class Listener:
    """Receives progress; the terminal view implements it, tests may too."""

    def trial_started(self, index: int, llm_kwargs: Mapping[str, Any]) -> None: ...

    def phase(self, index: int, phase: str) -> None: ...

    def trial_finished(self, record: TrialRecord) -> None: ...

    def note(self, message: str) -> None: ...


@dataclass
class StudyResult:
    """The trials of one search and the one that won (None when nothing in range works)."""

    records: List[TrialRecord]
    fit: Optional[TrialRecord]
    stop_reason: str
    launches: int = 0
    """Trials launched by this run (records taken from a journal are not launches)."""
    notes: List[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        """True when the search ran to its end (a fit, or proof that nothing in range works)."""
        return self.fit is not None or self.stop_reason.startswith("no candidate")


RunTrial = Callable[..., TrialRecord]


def run_study(plan: TrialPlan, objective: Objective, listener: Optional[Listener] = None,
              records: Optional[List[TrialRecord]] = None, run: RunTrial = run_trial,
              on_record: Callable[[TrialRecord], None] = lambda record: None) -> StudyResult:
    """Propose, launch and record until the objective is done or an outcome stops the search.

    `records` are trials already finished (from a journal): they are told to the objective first
    and never launched again. `on_record` sees each new record as soon as it exists.
    """
    listener = listener or Listener()
    records = list(records or [])
    baseline = plan.devices.snapshot() if plan.devices else []
    launches = 0
    stop_reason = "search complete"
    while True:
        history = [record.observation() for record in records]
        stopping = STOPPING_OUTCOMES - objective.informative
        stopper = next((r for r in records if r.outcome in stopping), None)
        if stopper is not None:
            stop_reason = "trial %d ended %s: %s" % (stopper.index, stopper.outcome.value, stopper.detail)
            break
        candidate = objective.propose(history)
        if candidate is None:
            break
        if len(records) >= MAX_TRIALS:
            stop_reason = "stopped after %d trials" % MAX_TRIALS
            break
        index = len(records) + 1
        kwargs = plan.llm_kwargs(candidate)
        listener.trial_started(index, kwargs)
        attempt = functools.partial(_launch, plan, run, index, kwargs, listener, baseline)
        record = run_with_retries(attempt, plan.retry)
        launches += 1 + len(record.retries)
        records.append(record)
        on_record(record)
        listener.trial_finished(record)
    fit_index = objective.fit([record.observation() for record in records])
    best = records[fit_index] if fit_index is not None else None
    if stop_reason != "search complete":
        notes = ["best verified so far: trial %d (not proven the best)" % best.index] if best else []
        return StudyResult(records, None, stop_reason, launches, notes)
    if best is None:
        stop_reason = "no candidate in the range started and served a full-length request"
    return StudyResult(records, best, stop_reason, launches)


def _launch(plan: TrialPlan, run: RunTrial, index: int, kwargs: Dict[str, Any], listener: Listener,
            baseline: list) -> TrialRecord:
    """One attempt: wait for the device memory of earlier trials to come back, run, sample the peak."""
    waited = plan.devices.wait_released(baseline) if plan.devices else {}
    if plan.devices:
        with plan.devices.sampler() as sampler:
            record = _run(plan, run, index, kwargs, listener)
        waited["peak_used_bytes"] = sampler.peak_used_bytes
    else:
        record = _run(plan, run, index, kwargs, listener)
    record.device = waited
    return record


def _run(plan: TrialPlan, run: RunTrial, index: int, kwargs: Dict[str, Any], listener: Listener) -> TrialRecord:
    return run(index, plan.python, kwargs, plan.work_dir / ("trial-%03d" % index), timeout_s=plan.timeout_s,
               env=plan.env, plain_attention=plan.plain_attention,
               on_phase=lambda phase: listener.phase(index, phase))
